"""A failure is replayed on fresh sessions before it is reported; one that does not come
back is said to be no verdict."""

from __future__ import annotations

from typing import Any

import pytest

import mutants
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import confirm, replay
from mutants.naive import Naive

STORY = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
]


class NaiveOnce(Naive):
    """The naive queue for its first few completions in this process, the reference's
    fencing after: its bug lives outside the database, which the contract forbids."""

    name = "naive-once"
    calls = 0

    def complete(self, conn: Any, claim: Any, effect: Any) -> bool:
        NaiveOnce.calls += 1
        if NaiveOnce.calls > 2:
            return bool(
                conn.execute(
                    "update jobs set status = 'done' where id = %s and attempt = %s "
                    "and status = 'running' returning id",
                    (claim.job_id, claim.token),
                ).fetchone()
                and (effect(conn) or True)
            )
        return bool(super().complete(conn, claim, effect))


def _broken(harness: Harness) -> None:
    harness.reset()
    with pytest.raises(PropertyViolated):
        replay.replay(harness, STORY)


def test_a_failure_that_comes_back_is_confirmed(reference_pool: actors.Pool) -> None:
    harness = Harness(queue=contract.load(mutants.ALL["naive"]), pool=reference_pool)
    _broken(harness)
    assert confirm.unconfirmed(harness) == []


def test_a_failure_that_does_not_come_back_is_no_verdict(reference_pool: actors.Pool) -> None:
    harness = Harness(queue=NaiveOnce(), pool=reference_pool)
    _broken(harness)
    assert confirm.unconfirmed(harness) == ["single-completion"]
