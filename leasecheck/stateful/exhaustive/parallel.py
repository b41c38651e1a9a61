"""One scope's search shared by several processes, each on a database of its own.

A search spends most of its time waiting on PostgreSQL, one round trip at a time:
on 2 cores, two searches side by side each ran about as fast as one alone (2.2 times
the schedules a second between them). So `leasecheck explore` deals each level's
programs to forked processes. The parent keeps the states met: a process asks it
whether the state its program reached is new before bringing it to rest (the costly
part of a new state), and once a level is done the parent reads the results in the
order the programs were dealt. So the frontier, the counts, where a budget of
schedules cuts, and the counterexample (the first program of its level, in that
order, that breaks a property) are those of one process searching alone. The parent
plays the counterexample again on its own database, so the failure it reports and
saves is one it saw.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import time
import traceback
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

from leasecheck.stateful.exhaustive.scope import Outcome, Progress, Scope, silent
from leasecheck.stateful.exhaustive.search import Budget, Fresh, first_time, found, run
from leasecheck.stateful.exhaustive.state import Tables
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated

HarnessMaker = Callable[[], AbstractContextManager[Harness]]
"""Opens a harness on a database of its own (in each process, after the fork)."""


def available() -> bool:
    """Whether processes can be forked here (the searchers inherit the loaded queue)."""
    return "fork" in multiprocessing.get_all_start_methods()


def key(state: Hashable) -> bytes:
    """Return a state as a short key that means the same in every process: its text is
    the same wherever it is computed (the state holds no address)."""
    return hashlib.blake2b(repr(state).encode(), digest_size=16).digest()


def explore(
    make: HarnessMaker,
    processes: int,
    scope: Scope,
    seconds: float | None = 60.0,
    ignored: Iterable[str] = (),
    *,
    schedules: int | None = None,
    progress: Progress = silent,
) -> tuple[Outcome, Harness]:
    """Search `scope` breadth first with `processes` searchers; return what it found and
    the parent's harness (its recorder holds a counterexample's failure); `progress` is
    told after each program answers."""
    started = time.monotonic()
    context = multiprocessing.get_context("fork")
    with contextlib.ExitStack() as stack:
        # Fork before the parent's harness starts threads of its own.
        searchers = [_start(context, make, scope, tuple(ignored)) for _ in range(processes)]
        stack.callback(_stop, searchers)
        pipes = [pipe for pipe, _ in searchers]
        harness = stack.enter_context(make())
        budget = Budget(schedules, seconds)
        done = _search(harness, pipes, scope, budget, tuple(ignored), progress, started)
    done.seconds = time.monotonic() - started
    return done, harness


@dataclass
class _Level:
    """One level's programs as dealt, and what the searchers answered of them."""

    programs: list[list[Step]]
    keys: dict[int, bytes] = field(default_factory=dict)
    offered: dict[int, list[Step]] = field(default_factory=dict)
    violated: set[int] = field(default_factory=set)
    """Programs that broke a property, in a step or at the end of a new state."""

    def first_violation(self) -> int | None:
        """Return the first program, in the order dealt, that breaks a property: a state
        whose end broke one breaks it for every program that reached it, whichever of
        them happened to reach it first."""
        ends = {self.keys[i] for i in self.violated if i in self.keys}
        also = {i for i, k in self.keys.items() if k in ends}
        return min(self.violated | also, default=None)


def _search(
    harness: Harness,
    pipes: list[Connection],
    scope: Scope,
    budget: Budget,
    ignored: tuple[str, ...],
    progress: Progress,
    started: float,
) -> Outcome:
    done = Outcome()
    tables = Tables(harness.pool.monitor, ignored)
    harness.reset()
    sequences = tables.sequences(harness.pool.monitor)
    start = scope.start()
    met: set[bytes] = set()
    try:
        state, _, offered = run(harness, start, scope, tables, first_time(set()), judge_end=True)
    except PropertyViolated as error:
        return found(done, error, start)
    after = tables.sequences(harness.pool.monitor)
    done.running_on = tuple(name for name, value in after.items() if sequences.get(name) != value)
    met.add(key(state))
    frontier = [(start, offered)]
    for depth in range(1, scope.moves + 1):
        level = _Level([[*prefix, move] for prefix, moves in frontier for move in moves])
        before = done.schedules

        def told(ran: int, depth: int = depth, total: int = len(level.programs)) -> None:
            progress(done, depth, ran, total)

        whole = _deal(level, pipes, met, budget, done, told)
        first = level.first_violation()
        if first is not None:  # counted as one process counts, up to the counterexample
            done.schedules = before + first + 1
            _new_states(level, met, done, first)
            return _replayed(harness, level.programs[first], scope, tables, done)
        if not whole:  # the states of the programs run, as one process counts them
            _new_states(level, met, done, done.schedules - before)
            done.complete = False
            return done
        frontier = _new_states(level, met, done, len(level.programs))
        done.depth = depth
        done.seconds = time.monotonic() - started
        told(len(level.programs))
    return done


def _new_states(
    level: _Level, met: set[bytes], done: Outcome, upto: int
) -> list[tuple[list[Step], list[Step]]]:
    """Count the states the level's programs before `upto` met first, in the order
    dealt, and return those programs with the moves each state offers."""
    frontier = []
    for i in range(upto):
        if i in level.offered and level.keys[i] not in met:
            met.add(level.keys[i])
            done.states += 1
            frontier.append((level.programs[i], level.offered[i]))
    return frontier


def _deal(
    level: _Level,
    pipes: list[Connection],
    met: set[bytes],
    budget: Budget,
    done: Outcome,
    told: Callable[[int], None],
) -> bool:
    """Deal the level's programs in order to idle searchers until all are answered, one
    breaks a property, or the budget is spent; return whether every program was run."""
    answered: set[bytes] = set(met)  # first come: who brings a new state to rest
    busy: dict[Connection, int] = {}
    idle = list(pipes)
    dealt, stop = 0, False
    while True:
        while idle and not stop and dealt < len(level.programs):
            if budget.spent(done):
                stop = True
                break
            pipe = idle.pop()
            pipe.send(level.programs[dealt])
            busy[pipe] = dealt
            dealt += 1
            done.schedules += 1
        if not busy:
            return dealt == len(level.programs) and not stop
        for ready in wait(list(busy)):
            assert isinstance(ready, Connection)
            index = busy[ready]
            try:
                message = ready.recv()
            except EOFError:  # the process is gone: killed, or out of memory
                program = _said(level.programs[index])
                raise SearcherFailed(f"a search process ended while it ran {program}") from None
            if message[0] == "state":
                level.keys[index] = message[1]
                ready.send(message[1] not in answered)
                answered.add(message[1])
                continue
            del busy[ready]
            idle.append(ready)
            if dealt - len(busy) < len(level.programs):  # the level's end is told after it
                told(dealt - len(busy))
            if message[0] == "done":
                level.offered[index] = message[1]
            elif message[0] == "violated":
                level.violated.add(index)
                stop = True
            else:
                raise SearcherFailed(
                    f"a search process failed on {_said(level.programs[index])}:\n{message[1]}"
                )


def _replayed(
    harness: Harness, steps: list[Step], scope: Scope, tables: Tables, done: Outcome
) -> Outcome:
    """Play the counterexample a searcher met on the parent's own database."""
    harness.reset()
    try:
        run(harness, steps, scope, tables, first_time(set()), judge_end=True)
    except PropertyViolated as error:
        return found(done, error, steps)
    raise SearcherFailed(
        f"a search process broke a property on {_said(steps)}, but played again it broke "
        "none: the queue does not answer alike on two runs of one program"
    )


class SearcherFailed(RuntimeError):
    """A search process failed, or what it reported did not replay."""


def _said(steps: list[Step]) -> str:
    return "[" + "; ".join(str(s) for s in steps) + "]"


# The searcher's side.


def _start(
    context: multiprocessing.context.ForkContext,
    make: HarnessMaker,
    scope: Scope,
    ignored: tuple[str, ...],
) -> tuple[Connection, multiprocessing.process.BaseProcess]:
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(child, make, scope, ignored), daemon=True)
    process.start()
    child.close()
    return parent, process


def _stop(searchers: list[tuple[Connection, multiprocessing.process.BaseProcess]]) -> None:
    """Tell each searcher to stop (it drops its database on the way out), and wait."""
    for pipe, _ in searchers:
        with contextlib.suppress(OSError):
            pipe.send(None)
    for pipe, process in searchers:
        process.join(timeout=30)
        if process.is_alive():
            process.terminate()
        pipe.close()


def _serve(pipe: Connection, make: HarnessMaker, scope: Scope, ignored: tuple[str, ...]) -> None:
    """Run the programs the parent deals, on a database of this process's own, until
    told to stop."""
    with contextlib.suppress(KeyboardInterrupt, EOFError, BrokenPipeError), make() as harness:
        tables = Tables(harness.pool.monitor, ignored)
        harness.reset()
        for steps in _orders(pipe):
            try:
                _, _, offered = run(harness, steps, scope, tables, _asking(pipe))
            except PropertyViolated:
                pipe.send(("violated",))
            except Exception:
                pipe.send(("failed", traceback.format_exc()))
                return
            else:
                pipe.send(("done", offered))


def _orders(pipe: Connection) -> Iterator[list[Step]]:
    """Yield each program dealt, until the parent says stop (None)."""
    while (order := pipe.recv()) is not None:
        yield order


def _asking(pipe: Connection) -> Fresh:
    def fresh(state: Hashable) -> bool:
        pipe.send(("state", key(state)))
        answer: bool = pipe.recv()
        return answer

    return fresh


__all__ = ["HarnessMaker", "SearcherFailed", "available", "explore", "key"]
