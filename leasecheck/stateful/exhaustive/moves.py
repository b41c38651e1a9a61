"""The moves a state offers the explorer: each rule of the table (`stateful.rules`) whose
precondition holds, with each distinct choice it has there (its `offers`).

Workers are equal up to their names, so of the workers that have done nothing yet
(no call, no fault, nothing held) only the first is offered a move: what the others
would do is the same program under another name. A queue that treats worker names
as more than opaque labels (orders or compares them) is not searched whole by this
reduction; none of the contract's calls gives it a reason to.
"""

from __future__ import annotations

from leasecheck.stateful.engine import isolation
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.program import Step
from leasecheck.stateful.rules import RULES, Choosing


def enabled(d: Driver, scope: Scope, preempted: int) -> list[Step]:
    """Return every distinct move the model offers now, within `scope`'s rules;
    `preempted` counts the preemptions the program has made."""
    core = d.core
    choosing = Choosing(
        twins=_twins(d),
        held_claims="claim" in core.caps.held_calls and scope.held_claims,
        times=scope.times,
        preempt=preempted < scope.preemptions,
        levels=_levels(core.h.isolation),
    )
    return [
        Step(rule.name, args)
        for rule in RULES
        if rule.offers is not None
        and scope.offers(rule.name)
        and (rule.when is None or rule.when(d))
        for args in rule.offers(d, choosing)
    ]


def _twins(d: Driver) -> frozenset[str]:
    """Return the workers that have done nothing yet, but the first of them: each is the
    first under another name (see the module's docstring)."""
    core = d.core
    acted = {e.worker for e in core.history.events}
    armed = set(core.scheduler.armed) | d.calls.timeouts.armed
    fresh = [
        w.name
        for w in core.workers
        if w.name not in acted
        and w.name not in armed
        and not (w.known_as or w.paused or w.crashed or w.held or w.txn is not None)
    ]
    return frozenset(fresh[1:])


def _levels(mode: str) -> tuple[str | None, ...]:
    """Return the levels a held transaction is opened at under `mode` (None: the default
    machine's, which names none)."""
    if mode == isolation.DEFAULT:
        return (None,)
    return isolation.LEVELS if mode == "drawn" else (mode.replace("-", " "),)
