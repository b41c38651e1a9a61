"""Issue 46's batch of the corpus (`bench/corpus/short_programs/`): each planted bug's
witness program breaks its property on the bug, and replays whole on its clean queue.

The replays run on the plugin's own harness (`leasecheck_harness`) against real
PostgreSQL, pointed at the queue by overriding the two fixtures that name and install
it, as `tests/test_corpus.py` does: each queue gets a database of its own with its own
schema. A witness is a few moves; the `ci` profile met none of them
(`python -m bench.ci_margin --corpus NAME` counts the shards that do).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench import corpus
from bench.corpus.short_programs.witnesses import WITNESSES
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.exhaustive import layer
from leasecheck.stateful.exhaustive.moves import enabled
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import ALL, PropertyViolated
from leasecheck.stateful.story import replay

BUGS = sorted(WITNESSES)


def _spec(name: str) -> str:
    spec = corpus.ALL[name].spec
    assert spec is not None, f"{name} is a Python queue"
    return spec


def _clean(bug: str) -> str:
    return corpus.VARIANTS[bug].queue


@pytest.fixture
def leasecheck_queue(request: pytest.FixtureRequest) -> Any:
    """The queue the test names (overrides the plugin's, for this module)."""
    return contract.load(_spec(request.param))


@pytest.fixture
def leasecheck_installed_dsn(
    leasecheck_server_dsn: str, leasecheck_worker_label: str, leasecheck_queue: Any
) -> Iterator[str]:
    """A database of its own for each queue, with the harness and the queue installed."""
    label = f"{leasecheck_worker_label}_short"
    with janitor.temporary(leasecheck_server_dsn, label) as dsn:
        clock.prepare(dsn, leasecheck_queue)
        yield dsn


def test_every_bug_of_the_batch_has_a_witness() -> None:
    """The batch's variants and the witnesses name the same bugs, each witness a property
    its bug is expected to break, on a clean queue of the batch."""
    batch = {n for n, e in corpus.VARIANTS.items() if "short_programs" in str(e.spec)}
    assert set(WITNESSES) == batch
    assert len(batch) == 7
    for bug, (props, steps) in WITNESSES.items():
        expected = contract.load(_spec(bug)).expected  # type: ignore[attr-defined]
        assert props and set(props) <= set(expected) <= set(ALL), bug
        assert steps[0].rule == "start" and len(steps) <= 12, bug
        assert _clean(bug) in corpus.QUEUES


def _on(queue: str, bug: str) -> Any:
    """A case run on `queue` (the fixture's indirect parameter), named by its bug."""
    return pytest.param(queue, bug, id=bug)


@pytest.mark.parametrize(
    ("leasecheck_queue", "bug"), [_on(b, b) for b in BUGS], indirect=["leasecheck_queue"]
)
def test_the_witness_breaks_its_property(leasecheck_harness: Harness, bug: str) -> None:
    props, steps = WITNESSES[bug]
    assert leasecheck_harness.queue.name == bug  # the override took
    with pytest.raises(PropertyViolated) as error:
        replay.replay(leasecheck_harness, steps)
    assert error.value.violation.prop in props, error.value.violation


@pytest.mark.parametrize(
    ("leasecheck_queue", "bug"), [_on(_clean(b), b) for b in BUGS], indirect=["leasecheck_queue"]
)
def test_the_clean_queue_keeps_every_property_over_it(
    leasecheck_harness: Harness, bug: str
) -> None:
    _, steps = WITNESSES[bug]
    assert leasecheck_harness.queue.name == _clean(bug)
    done = replay.replay(leasecheck_harness, steps)
    assert done.skipped == [], done.skipped
    assert done.ran == steps


IN_A_SCOPE = {"task-table-extend-from-lease-end": 2, "work-leases-unlocked-lease-row": 2}
"""Bugs whose witness is a program of one of the opening's small scopes (`layer.SCOPES`,
by index): every property run searches that scope whole, so every run meets them."""


@pytest.mark.parametrize(
    ("leasecheck_queue", "bug"), [_on(b, b) for b in IN_A_SCOPE], indirect=["leasecheck_queue"]
)
def test_the_witness_is_a_program_of_a_small_scope(leasecheck_harness: Harness, bug: str) -> None:
    """Each move of the witness is one its scope offers where it stands, within the
    scope's moves and preemptions; and the program breaks the property there."""
    scope, _ = layer.SCOPES[IN_A_SCOPE[bug]]
    props, steps = WITNESSES[bug]
    start = scope.start()
    assert steps[: len(start)] == start and len(steps) - len(start) <= scope.moves
    assert sum(s.rule == "preempt" for s in steps) <= scope.preemptions
    leasecheck_harness.reset()
    with pytest.raises(PropertyViolated) as error:
        _play_offered(Driver(leasecheck_harness), scope, steps, len(start))
    assert error.value.violation.prop in props, error.value.violation


OWN_RECLAIM = [
    Step("start", {"workers": 1}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),
    Step("claim", {"how": Take(worker=0, held=False)}),  # its loop claims its own job again
    Step("heartbeat", {"pick": 0}),  # the stale claim's renewal
]
"""One worker sleeps past its lease and claims its own job again; the stale claim's
heartbeat renews. The opening's sixth scope holds it (one worker, a lone stall: with no
other worker no rival claims, so the explorer offers only the lone stall)."""


@pytest.mark.parametrize(
    ("leasecheck_queue", "bug"),
    [_on("locked-jobs-heartbeat-by-worker", "fenced on the name"), _on("locked-jobs", "clean")],
    indirect=["leasecheck_queue"],
)
def test_a_heartbeat_fenced_on_the_name_dies_in_the_small_scopes(
    leasecheck_harness: Harness, bug: str
) -> None:
    """The corpus's heartbeat fenced on the worker's name, which `ci`'s search met in one
    shard of eight: every move of the program is one the sixth scope offers, and fencing
    breaks there; the clean queue keeps every property over the same moves."""
    scope, _ = layer.SCOPES[5]
    leasecheck_harness.reset()
    d = Driver(leasecheck_harness)
    if bug == "clean":
        _play_offered(d, scope, OWN_RECLAIM, 1)
        return
    with pytest.raises(PropertyViolated) as error:
        _play_offered(d, scope, OWN_RECLAIM, 1)
    assert error.value.violation.prop == "fencing", error.value.violation


def _play_offered(d: Driver, scope: Scope, steps: list[Step], begun: int) -> None:
    """Play `steps`, judged after each and at the end, as the explorer does; each after
    the first `begun` must be a move the scope offers then."""
    preempted = 0
    try:
        for i, step in enumerate(steps):
            if i >= begun:
                assert step in enabled(d, scope, preempted), f"step {i}: {step}"
            getattr(d, step.rule)(**step.args)
            preempted += step.rule == "preempt"
            d.check()
        d.teardown()
    except PropertyViolated:
        d.core.clean_up()
        raise
