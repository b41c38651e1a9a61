"""Deleting the steps a failure does not need: shorter programs, the same property."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import mutants
from leasecheck import suite
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import FENCING, PropertyViolated
from leasecheck.stateful.story import minimize, replay

NEEDED = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=1, held=False)}),  # w1: job1, token 1
    Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),  # past its lease
    Step("claim", {"how": Take(worker=0, held=True)}),  # w0 claims job1 (token 2) in a
    # transaction it holds open
    Step("complete", {"pick": 1}),  # w1 reads its attempt, then blocks behind w0's
    # transaction; it goes on when teardown commits
]
"""check-then-act's race, five steps: its completion reads the attempt, then updates by id."""

PADDED = [
    *NEEDED[:2],
    Step("time_passes", {"to": "second"}),
    Step("enqueue", {"jobs": 2}),
    *NEEDED[2:],
    *[Step("time_passes", {"to": "second"})] * 3,  # as Hypothesis's shrinker left them
]


def _harness(pool: actors.Pool) -> Harness:
    harness = Harness(queue=contract.load(mutants.ALL["check-then-act"]), pool=pool)
    harness.reset()
    return harness


def _found(harness: Harness, steps: list[Step]) -> str:
    """Replay `steps` as the search would have met them; return the property broken."""
    with pytest.raises(PropertyViolated) as error:
        replay.replay(harness, steps)
    return error.value.violation.prop


def test_the_steps_a_failure_does_not_need_are_deleted(reference_pool: actors.Pool) -> None:
    """A padded program of check-then-act's race comes back as the five steps it needs."""
    harness = _harness(reference_pool)
    assert _found(harness, PADDED) == FENCING
    (done,) = minimize.minimize_all(harness)
    assert (done.prop, done.before, done.after) == (FENCING, len(PADDED), len(NEEDED))
    assert list(harness.recorder.last[FENCING].program) == NEEDED
    # worker=0 picks among the workers that could stall then: the story names it, w1
    assert "state.asleep(how=Stall(worker=0, alone=True, then='nothing'))  # w1" in done.story
    assert "t=0.000001s w1 stalls past 30.000001s" in done.story
    assert _found(_harness(reference_pool), NEEDED) == FENCING  # the shorter one replays


def test_a_program_with_nothing_to_delete_stays_as_it_is(reference_pool: actors.Pool) -> None:
    """Every deletion from the five steps lets the race go: the failure is left alone."""
    harness = _harness(reference_pool)
    _found(harness, NEEDED)
    before = harness.recorder.last[FENCING]
    (done,) = minimize.minimize_all(harness)
    assert (done.before, done.after, done.story) == (len(NEEDED), len(NEEDED), ())
    assert done.replays == len(NEEDED) - 1  # each step after `start` tried once
    assert harness.recorder.last[FENCING] is before


def test_the_runs_counts_stay_the_searchs(reference_pool: actors.Pool) -> None:
    """Minimizing replays on sessions of its own: what the run exercised is not inflated."""
    harness = _harness(reference_pool)
    _found(harness, PADDED)
    coverage, moves = Counter(harness.coverage), Counter(harness.moves)
    minimize.minimize_all(harness)
    assert (harness.coverage, harness.moves) == (coverage, moves)


def test_the_budget_counts_replays(reference_pool: actors.Pool) -> None:
    """With one replay to spend, one deletion is tried (the last step's), whatever the clock."""
    harness = _harness(reference_pool)
    _found(harness, PADDED)
    (done,) = minimize.minimize_all(harness, replays=1)
    assert (done.replays, done.after) == (1, len(PADDED) - 1)


def test_a_stuck_replay_ends_the_pass(
    reference_pool: actors.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay that gets stuck has waited out the safety timeout: no further replay is made."""
    harness = _harness(reference_pool)
    _found(harness, PADDED)
    made: list[int] = []

    def stuck(*args: object, **kwargs: object) -> None:
        made.append(1)
        raise actors.Stuck("a call neither finished nor waited on a held transaction")

    monkeypatch.setattr(replay, "replay", stuck)
    (done,) = minimize.minimize_all(harness)
    assert (made, done.replays, done.after) == ([1], 1, len(PADDED))


def test_a_story_with_nothing_to_delete_is_told_in_the_same_form(
    reference_pool: actors.Pool, tmp_path: Path
) -> None:
    """A program no step of which can go is told as a shortened one is (the verdict, the
    timeline, the program step by step with whom each picked), not in Hypothesis's raw
    notes."""
    harness = _harness(reference_pool)

    def run() -> None:
        replay.replay(harness, NEEDED)

    with pytest.raises(pytest.fail.Exception) as failed:
        suite._reporting_failures(harness, tmp_path, run)
    story = str(failed.value.msg).splitlines()
    assert story[0].startswith("[fencing] ")
    said = "Failing program, 5 steps (as Hypothesis shrank it; no step could be deleted):"
    assert said in story and "timeline (simulated time; one lane per worker):" in story
    assert "state.claim(how=Take(worker=1, held=False))  # w1" in story
    assert not any(line.startswith("Failing test case") for line in story)
