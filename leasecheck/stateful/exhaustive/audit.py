"""The explorer's own test: programs that reach one state must have one future.

The search prunes a program whose state it met before, which is sound only if the
state takes in everything the future depends on. This checks that claim the only way
it can be checked, by experiment: it searches a scope, keeps pairs of programs that
reached one state by different paths, continues both with the same random moves, and
compares what followed (every call's answer, every fault's effect, and the verdict).
A part of the state left out shows as a pair whose futures differ. Every new move or
fault must keep this green, so none can be added without its part of the state.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass

from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.exhaustive.moves import enabled
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.exhaustive.state import Tables, fingerprint
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated


@dataclass(frozen=True)
class Twins:
    """Two programs that reached one state."""

    first: tuple[Step, ...]
    second: tuple[Step, ...]


@dataclass(frozen=True)
class Parted:
    """Twins whose futures differ under one continuation: the state misses a part."""

    twins: Twins
    then: tuple[Step, ...]
    first: tuple[Hashable, ...]
    second: tuple[Hashable, ...]

    def __str__(self) -> str:
        steps = "; ".join(str(s) for s in self.then)
        return (
            f"{_said(self.twins.first)} and {_said(self.twins.second)} reached one state, "
            f"but after {steps} they answered {self.first} and {self.second}"
        )


def _said(program: tuple[Step, ...]) -> str:
    return "[" + "; ".join(str(s) for s in program) + "]"


def twins(harness: Harness, scope: Scope, limit: int) -> list[Twins]:
    """Search `scope` breadth first (every program judged, none pruned by a violation's
    end) and return up to `limit` pairs of programs that reached one state."""
    tables = Tables(harness.pool.monitor)
    first: dict[Hashable, tuple[Step, ...]] = {}
    found: list[Twins] = []
    frontier = [tuple(scope.start())]
    for _ in range(scope.moves + 1):
        deeper: list[tuple[Step, ...]] = []
        for program in frontier:
            outcome = _play(harness, program, scope, tables)
            if outcome is None:
                continue  # a violation: its future is the verdict
            state, offered = outcome
            if state in first:
                found.append(Twins(first[state], program))
                if len(found) >= limit:
                    return found
                continue
            first[state] = program
            deeper.extend((*program, move) for move in offered)
        frontier = deeper
    return found


def _play(
    harness: Harness, program: tuple[Step, ...], scope: Scope, tables: Tables
) -> tuple[Hashable, list[Step]] | None:
    harness.reset()
    d = Driver(harness)
    try:
        for step in program:
            getattr(d, step.rule)(**step.args)
            d.check()
        return fingerprint(d, tables), enabled(d, scope, _preempted(program))
    except PropertyViolated:
        return None
    finally:
        d.core.clean_up()


def _preempted(program: tuple[Step, ...]) -> int:
    return sum(s.rule == "preempt" for s in program)


def futures(
    harness: Harness, pair: Twins, scope: Scope, continuations: int, length: int, seed: int
) -> list[Parted]:
    """Continue both programs of `pair` alike, `continuations` times with `length` random
    moves each; return the continuations after which they answered differently."""
    rng = random.Random(seed)
    parted = []
    for _ in range(continuations):
        then: list[Step] = []
        first = _future(harness, pair.first, then, scope, rng, length)
        second = _future(harness, pair.second, then, scope, None, len(then))
        if first != second:
            parted.append(Parted(pair, tuple(then), first, second))
    return parted


def _future(
    harness: Harness,
    program: tuple[Step, ...],
    then: list[Step],
    scope: Scope,
    rng: random.Random | None,
    length: int,
) -> tuple[Hashable, ...]:
    """Play `program`, then `then` (drawing it first with `rng`, when given), then the
    teardown; return what followed the program: each line of history (who, what, its
    answer) and the verdict."""
    harness.reset()
    d = Driver(harness)
    seen: list[Hashable] = []
    mark = 0
    try:
        for step in program:
            getattr(d, step.rule)(**step.args)
            d.check()
        mark = len(d.core.history.events)
        for i in range(length):
            if rng is not None:
                offered = enabled(d, scope, _preempted((*program, *then)))
                if not offered:
                    break
                then.append(rng.choice(offered))
            step = then[i]
            getattr(d, step.rule)(**step.args)
            d.check()
        d.teardown()
        verdict: Hashable = None
    except PropertyViolated as error:
        d.core.clean_up()
        verdict = error.violation.prop
    except BaseException:
        d.core.clean_up()
        raise
    for e in d.core.history.events[mark:]:
        seen.append((e.at, e.worker, e.op, e.kind, e.job, e.token, repr(e.value)))
    return (*seen, verdict)


def audit(
    harness: Harness,
    scope: Scope,
    pairs: int = 20,
    continuations: int = 3,
    length: int = 4,
    seed: int = 0,
) -> tuple[int, list[Parted]]:
    """Check up to `pairs` pairs of twins of `scope`; return how many were checked and
    every continuation that parted them (none, for an exact state)."""
    found = twins(harness, scope, pairs)
    parted = []
    for i, pair in enumerate(found):
        parted += futures(harness, pair, scope, continuations, length, seed + i)
    return len(found), parted
