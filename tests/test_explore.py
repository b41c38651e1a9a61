"""The bounded-exhaustive explorer: a small scope searched whole, or a counterexample."""

from __future__ import annotations

import mutants
from leasecheck import explore
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import actors, contract
from leasecheck.stateful.core import Harness
from leasecheck.stateful.properties import SINGLE_COMPLETION


def test_the_reference_has_no_violation_in_a_small_scope(reference_pool: actors.Pool) -> None:
    scope = explore.Scope(workers=2, jobs=1, moves=1, preemptions=1)
    done = explore.explore(Harness(queue=ReferenceQueue(), pool=reference_pool), scope)
    assert done.violation is None and done.complete
    assert done.schedules >= 10 and 0 < done.states <= done.schedules
    assert done.said(scope).startswith("no violation in scope (2 workers, 1 job, up to 1 moves")


def test_the_story_is_found_in_two_moves(reference_pool: actors.Pool) -> None:
    """claim, then asleep (another reclaims, the sleeper completes): the naive queue breaks."""
    queue = contract.load(mutants.ALL["naive"])
    scope = explore.Scope(workers=2, jobs=1, moves=2, preemptions=0)
    done = explore.explore(Harness(queue=queue, pool=reference_pool), scope)
    assert done.violation is not None
    assert done.violation.violation.prop == SINGLE_COMPLETION
    assert [s.rule for s in done.counterexample] == ["start", "claim", "asleep"]


def test_a_search_cut_short_says_it_proves_nothing(reference_pool: actors.Pool) -> None:
    scope = explore.Scope(moves=3)
    done = explore.explore(Harness(queue=ReferenceQueue(), pool=reference_pool), scope, 0.0)
    assert not done.complete
    assert "which proves nothing about the rest" in done.said(scope)
