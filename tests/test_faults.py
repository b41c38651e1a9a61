"""Faults real queues meet that the machine made none of before, replayed as programs.

Each program runs through the driver against the real PostgreSQL: the mutant the
fault was written for breaks its property, the reference keeps every property over
the very same steps, and the run without the fault's move lets the mutant through.
"""

from __future__ import annotations

import pytest

import mutants
from leasecheck.stateful import actors, contract, replay
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import EXCLUSIVE_LEASE, PropertyViolated
from tests.fixtures import REFERENCE


def _harness(spec: str, pool: actors.Pool) -> Harness:
    harness = Harness(queue=contract.load(spec), pool=pool, spec=spec)
    harness.reset()
    return harness


RESTART_UNDER_ITS_NAME = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),  # w0: job1, token 1, lease to 30 s
    Step("restart", {"pick": 0}),  # w0 dies; w0.2 comes up under the name w0, holding nothing
    Step("claim", {"how": Take(worker=0, held=False)}),  # w0.2 claims as "w0"
]
"""A worker restarted under its old name claims while its old lease still runs."""


def test_a_restart_under_the_old_name_is_caught_reclaiming_a_live_lease(
    reference_pool: actors.Pool,
) -> None:
    harness = _harness(mutants.ALL["recover-by-name"], reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        replay.replay(harness, RESTART_UNDER_ITS_NAME)
    violation = caught.value.violation
    assert violation.prop == EXCLUSIVE_LEASE, violation
    assert "w0.2:job1#2 was granted" in violation.message, violation.message
    assert "w0:job1#1 held a lease" in violation.message, violation.message
    (history,) = [f.history for f in harness.recorder.last.values()]
    crash = [e for e in history.events if e.op == "crash"]
    assert [e.note for e in crash] == ["restarted; w0.2 starts under the old name w0"]


def test_the_reference_holds_over_a_restart_under_the_old_name(
    reference_pool: actors.Pool,
) -> None:
    done = replay.replay(_harness(REFERENCE, reference_pool), RESTART_UNDER_ITS_NAME)
    assert done.skipped == [], done.skipped


def test_a_crash_gives_a_new_name_and_the_mutant_goes_free(reference_pool: actors.Pool) -> None:
    """The same program with a crash instead: the replacement is w0.2 to the queue too,
    so nothing is marked with its name and the claim takes nothing early."""
    steps = [
        s if s.rule != "restart" else Step("crash", {"pick": 0}) for s in RESTART_UNDER_ITS_NAME
    ]
    done = replay.replay(_harness(mutants.ALL["recover-by-name"], reference_pool), steps)
    assert done.skipped == [], done.skipped
