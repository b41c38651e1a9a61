"""A program that meets different answers when it runs again is no verdict, said in one line.

Hypothesis notices when one program, run twice, takes two paths (its FlakyStrategyDefinition
or FlakyFailure): the answers depended on something besides the program. Absurd on
PostgreSQL 15 does that (ties broken by run ids made of random bits). The queue here
does it on purpose, and deterministically: every other claim, counted over the whole
run, hands out nothing.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg import Connection

from leasecheck import suite
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from tests.fixtures import derandomized


class EveryOtherClaim(ReferenceQueue):
    """The reference, but every second claim of the run answers nothing (a counter the
    program does not see decides it)."""

    name = "every-other-claim"

    def __init__(self) -> None:
        super().__init__()
        self.claims = itertools.count()

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Any:
        if next(self.claims) % 2:
            return None
        return super().claim(conn, worker, lease)


def test_answers_the_program_does_not_decide_are_no_verdict(
    reference_pool: actors.Pool, tmp_path: Path
) -> None:
    harness = Harness(queue=EveryOtherClaim(), pool=reference_pool)
    harness.reset()

    def run() -> None:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(100))

    with pytest.raises(pytest.fail.Exception) as failed:
        suite._reporting_failures(harness, tmp_path, run)
    said = str(failed.value)
    assert said.startswith(
        "leasecheck: NOT A VERDICT: the same program met different answers when it ran again "
        "(Hypothesis: Flaky"
    ), said
    assert "\n" not in said and "so no property was judged on it" in said
    # where: a claim that took the job in one run and answered nothing in the other
    assert "the two runs parted at step " in said and "state.claim(" in said, said
    assert "an earlier run of the same steps" in said, said
    assert not list(tmp_path.iterdir()), "no failure files: nothing was judged"
