"""The opening's small scopes: each shard searches its share whole, and says so."""

from __future__ import annotations

from typing import Any

import pytest

import mutants
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.exhaustive import layer
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.properties import EXCLUSIVE_LEASE, NO_HIDDEN_CLAIMS, PropertyViolated
from tests.test_exhaustive import SCOPE, CountsAfterClaim

TINY = Scope(workers=1, jobs=1, moves=2, preemptions=0, rules=frozenset({"claim", "complete"}))


@pytest.fixture
def scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two small scopes in place of the layer's own, each with room to be searched whole."""
    monkeypatch.setattr(layer, "SCOPES", ((TINY, 100), (SCOPE, 500)))


def test_the_shards_search_every_scope_once_between_them(
    reference_pool: actors.Pool, scopes: None
) -> None:
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    first, second = layer.play(harness, 0, 2), layer.play(harness, 1, 2)
    assert [s.scope for s in first + second] == [TINY.where(), SCOPE.where()]
    assert all(s.complete and s.depth == s.moves for s in first + second)
    assert harness.opening is None
    lines = layer.said([s.as_dict() for s in first + second])
    assert lines == [f"no violation in: {TINY.where()}", f"no violation in: {SCOPE.where()}"]


def test_a_scope_holding_a_counterexample_fails_the_run(
    reference_pool: actors.Pool, scopes: None
) -> None:
    harness = Harness(queue=CountsAfterClaim(), pool=reference_pool)
    with pytest.raises(PropertyViolated) as caught:
        layer.play(harness, 0, 1)
    assert caught.value.violation.prop == NO_HIDDEN_CLAIMS
    assert harness.opening == f"small scope searched whole: {SCOPE.where()}"
    assert [s.rule for s in harness.recorder.last[NO_HIDDEN_CLAIMS].program] == [
        "start", "enqueue", "claim", "time_out", "claim",
    ]  # fmt: skip


def test_a_budget_spent_says_how_deep_it_went(
    reference_pool: actors.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never "no violation in" a scope the budget cut short."""
    monkeypatch.setattr(layer, "SCOPES", ((SCOPE, 5),))
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    (searched,) = layer.play(harness)
    assert not searched.complete and searched.depth < SCOPE.moves
    (line,) = layer.said([searched.as_dict()])
    assert line.startswith(f"searched whole only to {searched.depth} of 3 moves (budget spent)")


class DeletesOnReset(ReferenceQueue):
    """The reference emptied by a plain DELETE: its sequences run on across programs."""

    name = "deletes-on-reset"

    def reset(self, conn: Any) -> None:
        conn.execute("delete from receipts; delete from jobs")


@pytest.mark.parametrize("queue", [DeletesOnReset(), ReferenceQueue()], ids=lambda q: q.name)
def test_a_reset_that_leaves_ids_running_on_is_named_when_it_cuts_a_scope(
    reference_pool: actors.Pool, monkeypatch: pytest.MonkeyPatch, queue: ReferenceQueue
) -> None:
    """A queue whose reset leaves its sequences running on gets other ids on every run of
    one program, so no two of its states merge and its budget runs out early: the line
    that says how deep the scope went says why, and how to reset instead."""
    monkeypatch.setattr(layer, "SCOPES", ((TINY, 2),))
    harness = Harness(queue=queue, pool=reference_pool)
    (searched,) = layer.play(harness)
    assert not searched.complete
    (line,) = layer.said([searched.as_dict()])
    if queue.name == "deletes-on-reset":
        assert "its reset leaves public.jobs_id_seq running on" in line, line
        assert "RESTART IDENTITY" in line
    else:
        assert "running on" not in line, line


def test_the_lease_edge_scope_kills_a_reclaim_a_moment_early(reference_pool: actors.Pool) -> None:
    """The seventh scope: early-reclaim hands a job out in the last half second of its
    owner's lease, which only a clock just before the lease end, its owner stopped,
    reaches. The scope finds it within its budget; the reference holds the scope whole."""
    scope, budget = layer.SCOPES[6]
    early = Harness(queue=contract.load(mutants.ALL["early-reclaim"]), pool=reference_pool)
    found = explore(early, scope, None, schedules=budget)
    assert found.violation is not None and found.violation.violation.prop == EXCLUSIVE_LEASE
    held = explore(
        Harness(queue=ReferenceQueue(), pool=reference_pool), scope, None, schedules=budget
    )
    assert held.violation is None and held.complete


@pytest.mark.parametrize("mutant", ["in-subquery-claim", "from-subquery-claim"])
def test_the_planner_scope_kills_a_claim_that_picks_in_a_subquery(
    reference_pool: actors.Pool, mutant: str
) -> None:
    """The eighth scope: the tables analyzed while tiny, grown, then a claim. A claim that
    picks its job in a subquery takes several under the new plan and hands out one, which
    only the search's `replan` reached before. The reference holds the scope whole."""
    scope, budget = layer.SCOPES[7]
    queue = contract.load(mutants.ALL[mutant])
    if not Harness(queue=queue, pool=reference_pool).can_replan():
        pytest.skip("replans need PostgreSQL 18 or later (statistics put back)")
    found = explore(Harness(queue=queue, pool=reference_pool), scope, None, schedules=budget)
    assert found.violation is not None
    assert found.violation.violation.prop in queue.expected  # type: ignore[attr-defined]
    assert [s.rule for s in found.counterexample][1:] in (
        ["replan", "claim"],
        ["claim", "replan", "claim"],
    )
    held = explore(
        Harness(queue=ReferenceQueue(), pool=reference_pool), scope, None, schedules=budget
    )
    assert held.violation is None and held.complete


def test_without_replans_the_planner_scope_says_it_was_not_searched(
    reference_pool: actors.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(layer, "SCOPES", (layer.SCOPES[7],))
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool, replans=False)
    (searched,) = layer.play(harness)
    assert not searched.complete and searched.schedules == 0
    (line,) = layer.said([searched.as_dict()])
    assert line.startswith("not searched (replans need a server that can put statistics back")
