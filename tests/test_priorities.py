"""Priority schedules (PCT): the highest-priority eligible worker makes each own move,
the worker that acted last drops below every other at a change point, faults still fall
on the drawn worker, and a program with a schedule saves and replays as it ran."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import mutants
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract, program
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.engine.priorities import Priorities
from leasecheck.stateful.machine import Harness, LeaseMachine, PriorityMachine, machine_for
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from tests.fixtures import derandomized


def test_the_top_priority_acts_and_drops_at_each_change_point() -> None:
    p = Priorities(order=[0, 2, 1], changes=[3, 1])
    assert p.among(["w0", "w1", "w2"]) == "w1"
    p.step()  # step 1 is a change point: w1, which acted last, drops below all
    assert p.among(["w0", "w1", "w2"]) == "w2"
    p.step()
    p.step()  # step 3, the second change point: w2 drops below w1
    assert p.among(["w0", "w1", "w2"]) == "w0"
    assert p.of("w2") < p.of("w1") < p.of("w0")
    assert p.among(["w1", "w2"]) == "w1"


@pytest.fixture
def harness(reference_dsn: str) -> Iterator[Harness]:
    pool = actors.Pool(reference_dsn)
    h = Harness(queue=ReferenceQueue(), pool=pool)
    h.reset()
    yield h
    pool.close()


def _claimers(d: Driver) -> list[str]:
    return [w.name for w in d.core.workers if w.held]


def test_own_moves_follow_priorities_and_faults_the_drawn_index(harness: Harness) -> None:
    d = Driver(harness)
    try:
        d.start(3, order=[0, 2, 1], changes=[2, 3])  # w1 first; step 2 finds no one to drop
        d.enqueue(2)
        d.claim(Take(worker=0, held=False))  # step 3: index 0 would be w0; w1 claims, drops
        assert _claimers(d) == ["w1"]
        d.claim(Take(worker=0, held=False))  # step 4: w2 claims
        assert _claimers(d) == ["w1", "w2"]
        d.pause(0)  # a fault: the drawn worker, w0
        assert [w.name for w in d.core.workers if w.paused] == ["w0"]
    finally:
        d.teardown()


def test_a_scheduled_program_saves_and_replays(harness: Harness) -> None:
    steps = [
        Step("start", {"workers": 2, "order": [1, 0], "changes": [5]}),
        Step("claim", {"how": Take(worker=1, held=False)}),
    ]
    again = program.from_json(program.to_json(steps))
    assert again == steps
    replay.replay(harness, again)
    assert harness.moves == {"start": 1, "claim": 1}


def test_the_priority_machine_finds_what_the_random_one_does(reference_dsn: str) -> None:
    """A mutant a short program kills dies under the priority machine too (no search
    shortcut: examples are generated as a run makes them)."""
    pool = actors.Pool(reference_dsn)
    harness = Harness(queue=contract.load(mutants.ALL["attempt-key"]), pool=pool)
    harness.reset()
    try:
        with pytest.raises(PropertyViolated, match="unique-effects"):
            run_state_machine_as_test(lambda: PriorityMachine(harness), settings=derandomized(50))
        starts = [s for s in harness.recorder.last["unique-effects"].program if s.rule == "start"]
        assert "order" in starts[0].args and "changes" in starts[0].args
    finally:
        pool.close()


def test_schedules_by_name() -> None:
    assert machine_for("pct") is PriorityMachine
    assert [machine_for("mixed", shard) for shard in range(3)] == [
        LeaseMachine,
        PriorityMachine,
        LeaseMachine,
    ]
    with pytest.raises(KeyError):
        machine_for("fair")
