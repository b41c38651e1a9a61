"""The opening (`stateful.opening`): its fixed stories hold on correct queues and each
plain bug dies in the story written for it, before any example is drawn.

The bugs here are the ones the search alone found in about half of the default runs of
the foreign corpus (docs/benchmarks.md): a missing fence on the heartbeat or on a
failure report, a fence on the worker's name, check-then-act on a failure report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from bench import corpus
from leasecheck.dbfixtures import janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract, opening
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from mutants import ALL as MUTANTS
from tests.fixtures import harnesses

HarnessOf = Callable[[str], Harness]


@pytest.fixture
def harness_of(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[HarnessOf]:
    """Return a function that gives a harness on a fresh database with `spec`'s queue."""
    with (
        janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_open") as dsn,
        harnesses(dsn) as make,
    ):
        yield make


CORRECT = [
    "leasecheck.reference.queue:ReferenceQueue",
    *(e.spec for e in corpus.QUEUES.values() if e.spec is not None),
]


@pytest.mark.parametrize("spec", CORRECT)
def test_a_correct_queue_holds_through_every_story(spec: str, harness_of: HarnessOf) -> None:
    harness = harness_of(spec)
    opening.play(harness)
    assert harness.played == len(opening.stories(harness.caps, harness.queue.max_attempts))
    assert harness.opening is None and harness.played >= 16
    assert not harness.recorder.last


PLAIN_BUGS = [
    (MUTANTS["unfenced-heartbeat"], "takeover: heartbeat, rival commits", "fencing"),
    (MUTANTS["unfenced-fail"], "takeover: fail, rival commits", "fencing"),
    (MUTANTS["no-retry-cap"], "expiry past the cap of 3", "retry-cap"),
    (corpus.VARIANTS["locked-jobs-heartbeat-by-worker"].spec, "own reclaim: heartbeat", "fencing"),
    (corpus.VARIANTS["uuid-tasks-complete-by-worker"].spec, "own reclaim: complete", "fencing"),
    (
        corpus.VARIANTS["orm-items-check-then-act-fail"].spec,
        "takeover: fail, rival holds",
        "fencing",
    ),
]


@pytest.mark.parametrize(("spec", "story", "prop"), PLAIN_BUGS)
def test_each_plain_bug_dies_in_its_story(
    spec: str, story: str, prop: str, harness_of: HarnessOf
) -> None:
    harness = harness_of(spec)
    with pytest.raises(PropertyViolated) as raised:
        opening.play(harness)
    assert (harness.opening, raised.value.violation.prop) == (story, prop)
    assert list(harness.recorder.last) == [prop]


def test_the_check_then_act_report_dies_only_paused_in_flight(harness_of: HarnessOf) -> None:
    """With the rival's claim committed at once, a check-then-act failure report reads
    the new owner and refuses; paused between its read and its write it is accepted."""
    spec = corpus.VARIANTS["orm-items-check-then-act-fail"].spec
    assert spec is not None
    harness = harness_of(spec)
    caps = harness.caps
    told = {s.name: s for s in opening.stories(caps, harness.queue.max_attempts)}
    replay.replay(harness, list(told["takeover: fail, rival commits"].steps))
    with pytest.raises(PropertyViolated) as raised:
        replay.replay(harness, list(told["report paused in flight: fail, after 2"].steps))
    assert raised.value.violation.prop == "fencing"


@pytest.mark.parametrize("count", [1, 2, 3, 8, 40])
def test_a_runs_shards_play_each_story_once(count: int) -> None:
    caps = contract.capabilities(ReferenceQueue())
    told = opening.stories(caps, 3)
    shares = [told[index::count] for index in range(count)]
    assert sorted(s.name for share in shares for s in share) == sorted(s.name for s in told)
    assert len({s.name for s in told}) == len(told)


def test_a_queue_gets_the_stories_it_can_play() -> None:
    """No heartbeat stories without heartbeats, no held rival without held claims, no
    own reclaim for a worker of one job at a time, no expiry story without a cap."""
    caps = contract.Capabilities(
        ordered_tokens=True, held_transactions=False, heartbeats=False, advance_clock=None
    )
    names = [s.name for s in opening.stories(caps, 3)]
    assert not [n for n in names if "heartbeat" in n or "holds" in n or "batch" in n], names
    assert {"own reclaim: complete", "takeover: fail, rival commits"} <= set(names)
    assert "expiry past the cap of 3" in names
    one = dataclasses.replace(caps, one_claim_per_worker=True)
    assert not [s for s in opening.stories(one, None) if s.name.startswith(("own", "expiry"))]
