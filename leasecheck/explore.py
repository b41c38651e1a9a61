"""`leasecheck explore`: every schedule of a small scope, not a sample of them.

Hypothesis samples programs; a small scope can be searched whole instead. For W
workers and J jobs, the command runs every program of up to N moves with at most P
preemptions of a call between its statements (`stateful.exhaustive`). It ends in a
counterexample, saved as a property run saves one, or in "no violation in scope: X
schedules, Y distinct states", or, when the time budget runs out first, says how far
it got: a search cut short is no proof.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from leasecheck.dbfixtures import janitor, servers
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors, isolation, probe
from leasecheck.stateful.engine.core import MAX_JOBS
from leasecheck.stateful.exhaustive import parallel
from leasecheck.stateful.exhaustive.scope import Outcome, Scope
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.moves import TIMES


def add_parser(commands: Any) -> None:
    """Add `leasecheck explore` to the command's subparsers."""
    cmd = commands.add_parser(
        "explore",
        help="search every schedule of a small scope",
        description="Bounded-exhaustive search: every program of up to MOVES moves of "
        "WORKERS workers over JOBS jobs, with at most PREEMPTIONS calls paused between "
        "their statements. Exits 0 when the scope holds, 1 on a counterexample (saved as a "
        "property run saves one), 3 when the time budget ran out first.",
    )
    cmd.add_argument("queue", metavar="QUEUE", help="the queue as module:attr")
    cmd.add_argument("--workers", type=int, default=2)
    cmd.add_argument("--jobs", type=int, default=1)
    cmd.add_argument("--moves", type=int, default=3)
    cmd.add_argument("--preemptions", type=int, default=1)
    cmd.add_argument("--seconds", type=float, default=600.0, help="time budget (600)")
    cmd.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="RULE",
        help="offer only this move (claim, complete, fail, time_passes, ...); repeat for "
        "each; default: every move",
    )
    cmd.add_argument(
        "--time",
        action="append",
        default=[],
        choices=TIMES,
        metavar="WHERE",
        help="let time_passes move the clock only here (one of: " + ", ".join(TIMES) + "); "
        "repeat for each; default: all of them",
    )
    cmd.add_argument(
        "--ignore-column",
        action="append",
        default=[],
        metavar="NAME",
        help="leave this column (NAME in any table, or TABLE.NAME) out of a state: one that "
        "holds a random id or a real-time stamp differs on every run, so no two states "
        "would ever merge; repeat for each",
    )
    cmd.add_argument(
        "--leasecheck-isolation",
        dest="isolation",
        default=isolation.from_env(),
        choices=list(isolation.MODES),
        help="held transactions' level; drawn: every level is a move of its own",
    )
    cmd.add_argument(
        "--pg-dsn",
        default=os.environ.get("LEASECHECK_DSN"),
        help="your PostgreSQL server (default: $LEASECHECK_DSN, else an embedded one)",
    )
    cmd.add_argument(
        "--processes",
        type=int,
        default=None,
        metavar="N",
        help="search processes, each on a database of its own (default: the CPUs this "
        "process may use, at most 4; 1 searches in this process)",
    )
    cmd.add_argument("--leasecheck-dir", default=".leasecheck", help="where failures go")
    cmd.set_defaults(run=command)


class Told:
    """Says on stderr how far a search has got: each program length searched whole, and
    every `EVERY` seconds within a long one, so a search of minutes is never silent."""

    EVERY = 15.0

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()

    def __call__(self, done: Outcome, depth: int, ran: int, total: int) -> None:
        now = time.monotonic()
        if ran < total and now - self.last < self.EVERY:
            return
        self.last = now
        seconds = f"{now - self.started:.0f} s"
        if ran == total:
            counts = f"{done.schedules} schedules, {done.states} distinct states, {seconds}"
            said = f"programs of {depth} move{'s' * (depth != 1)} searched whole ({counts})"
        else:
            said = f"{ran} of {total} programs of {depth} moves run ({seconds})"
        print(f"leasecheck explore: {said}", file=sys.stderr, flush=True)


def _processes(asked: int | None) -> int | None:
    """Return how many processes search: as asked, else the CPUs this process may use, at
    most `MOST_PROCESSES` (1 where processes cannot be forked); None for a number below 1."""
    if asked is not None:
        return asked if asked >= 1 else None
    if not parallel.available():
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, MOST_PROCESSES))


MOST_PROCESSES = 4
"""The default's ceiling: each searcher holds a database and about fifteen connections,
and a server's default max_connections is 100; past the cores, more only wait."""


def _clock_problem(server_dsn: str, queue: Any) -> str | None:
    """Return why the queue cannot run on simulated time, tried on a database of its own."""
    with janitor.temporary(server_dsn, "explore") as dsn:
        clock.prepare(dsn, queue)
        with clock.connect(dsn) as conn:
            return probe.clock_problem(queue, conn)


def command(args: Any) -> int:
    """Run `leasecheck explore`; print the closing line (and the counterexample)."""
    scope = Scope(
        args.workers,
        args.jobs,
        args.moves,
        args.preemptions,
        frozenset(args.rule),
        tuple(args.time) or TIMES,
    )
    if not (1 <= scope.workers <= 5 and 1 <= scope.jobs <= MAX_JOBS and scope.moves >= 1):
        print(
            f"leasecheck explore: give 1-5 workers, 1-{MAX_JOBS} jobs and at least 1 move",
            file=sys.stderr,
        )
        return 2
    processes = _processes(args.processes)
    if processes is None:
        print("leasecheck explore: give --processes 1 or more", file=sys.stderr)
        return 2
    if processes > 1 and not parallel.available():
        print(
            "leasecheck explore: searching in several processes needs fork(), which this "
            "platform lacks: give --processes 1",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, os.getcwd())
    try:
        queue = contract.load(args.queue)
        server = servers.resolve("embedded", args.pg_dsn, "")
    except (contract.ContractError, servers.ServerUnavailable) as exc:
        print(f"leasecheck explore: {exc}", file=sys.stderr)
        return 2
    try:
        problem = _clock_problem(server.dsn, queue)
        if problem is not None:
            print(problem, file=sys.stderr)
            return 2

        @contextlib.contextmanager
        def make() -> Iterator[Harness]:
            with janitor.temporary(server.dsn, "explore") as dsn:
                clock.prepare(dsn, queue)
                pool = actors.Pool(dsn, clients=contract.clients(queue))
                try:
                    yield Harness(queue=queue, pool=pool, spec=args.queue, isolation=args.isolation)
                finally:
                    pool.close()

        told = Told()
        if processes > 1:
            try:
                done, harness = parallel.explore(
                    make, processes, scope, args.seconds, args.ignore_column, progress=told
                )
            except parallel.SearcherFailed as exc:  # no verdict: said in one line
                print(f"leasecheck explore: no verdict: {exc}", file=sys.stderr)
                return 2
        else:
            with make() as harness:
                done = explore(harness, scope, args.seconds, args.ignore_column, progress=told)
    finally:
        server.stop()
    if done.violation is not None:
        print(str(done.violation))
        print("\n".join(str(s) for s in done.counterexample))
        written = harness.recorder.write(
            Path(args.leasecheck_dir), queue.name, args.queue, harness.excused
        )
        for path in (p for p in written if p.suffix == ".json"):
            print(f"leasecheck: saved {path}; replay it with: leasecheck replay {path}")
    print(f"leasecheck explore: {done.said(scope)}")
    return 1 if done.violation is not None else (0 if done.complete else 3)


__all__ = ["Told", "add_parser", "command"]
