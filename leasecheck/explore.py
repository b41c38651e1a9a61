"""Bounded-exhaustive search: every schedule of a small scope, not a sample of them.

Hypothesis samples programs; a small scope can be searched whole instead. For W
workers and J jobs, the explorer runs every program of up to N primitive moves (each
rule with each distinct choice of worker or claim the model offers at that point;
`asleep`, the story's stall, among them, as it reaches in one move what takes the
others four) with at most P preemptions of a call between its statements, breadth
first. Each program runs from a reset queue on the
driver directly, is judged after every move and then torn down (heal, finish, drain,
judge), so a program that breaks a property is a counterexample with the same files
a property run leaves. A program whose end state (the model, what the queue's
`state()` shows, and every row of its tables) was reached before is not extended: what
follows it was explored.
It ends in a counterexample or in "no violation in scope: X schedules, Y distinct
states", or, when the time budget runs out first, says how far it got: a search cut
short is no proof.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg import Connection, sql

from leasecheck.dbfixtures import janitor, servers
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors, isolation, probe
from leasecheck.stateful.engine.core import MAX_JOBS, Harness
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.moves import RIVALS, WAKE_UP, Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.sqlfile import load

TIMES = ("lease-end", "past-lease-end", "before-lease-end", "beat")
AFTERS = (1, 2, 3)


@dataclass(frozen=True)
class Scope:
    """How small the world is: workers, jobs, moves per program, preemptions per program."""

    workers: int = 2
    jobs: int = 1
    moves: int = 3
    preemptions: int = 1

    def start(self) -> list[Step]:
        steps = [Step("start", {"workers": self.workers})]
        if self.jobs > 1:
            steps.append(Step("enqueue", {"jobs": self.jobs - 1}))
        return steps


@dataclass
class Outcome:
    """What a search found, and how much of the scope it covered."""

    schedules: int = 0
    states: int = 0
    seconds: float = 0.0
    complete: bool = True
    """False when the time budget ran out before the scope was searched whole."""
    depth: int = 0
    """The program length searched whole."""
    violation: PropertyViolated | None = None
    counterexample: list[Step] = field(default_factory=list)

    def said(self, scope: Scope) -> str:
        """Return the closing line."""
        where = (
            f"{scope.workers} workers, {scope.jobs} job{'s' * (scope.jobs > 1)}, up to "
            f"{scope.moves} moves, {scope.preemptions} preemption"
            f"{'s' * (scope.preemptions != 1)}"
        )
        counts = f"{self.schedules} schedules, {self.states} distinct states, {self.seconds:.0f} s"
        if self.violation is not None:
            return f"violation in scope ({where}) after {counts}"
        if not self.complete:
            return (
                f"time ran out: programs of up to {self.depth} moves searched whole, not "
                f"{scope.moves} ({where}; {counts}); no violation found so far, which proves "
                "nothing about the rest"
            )
        return f"no violation in scope ({where}): {counts}"


def enabled(d: Driver, scope: Scope, preempted: int) -> list[Step]:
    """Return every distinct primitive move the model offers now."""
    out: list[Step] = []

    def picks(rule: str, count: int, **extra: object) -> None:
        out.extend(Step(rule, {"pick": i, **extra}) for i in range(count))

    if d.can_claim():
        held = [False, True] if "claim" in d.core.caps.held_calls else [False]
        for i in range(len(d.core.claimers())):
            out.extend(Step("claim", {"how": Take(worker=i, held=h)}) for h in held if not h)
            if True in held:
                out.extend(
                    Step("claim", {"how": Take(worker=i, held=True)} | _level(level))
                    for level in _levels(d.core.h.isolation)
                )
    if d.can_claim_batch():
        for size in (1, 2):
            picks("claim_batch", len(d.core.claimers()), size=size)
    if d.can_complete_batch():
        holders = [w for w in d.core.workers if w.can_act and d.core.may(w, "complete") and w.held]
        for size in (1, 2):
            picks("complete_batch", len(holders), size=size)
    if d.can_heartbeat():
        picks("heartbeat", len(d.core.pairs("heartbeat")))
    for rule, call in (("complete", "complete"), ("fail", "fail"), ("send_effect", "send")):
        picks(rule, len(d.core.pairs(call)))
    if d.can_stall():
        stallers = len([w for w in d.core.workers if not w.paused and w.granted])
        rivals = RIVALS if "claim" in d.core.caps.held_calls else RIVALS[:1]
        for i in range(stallers):
            hows = [Stall(worker=i, alone=False, then=t, rival=r) for t in WAKE_UP for r in rivals]
            hows += [Stall(worker=i, alone=True, then=t) for t in WAKE_UP]
            out.extend(Step("asleep", {"how": how}) for how in hows)
    picks("pause", len([w for w in d.core.workers if not w.paused]))
    picks("resume", len([w for w in d.core.workers if w.paused]))
    picks("crash", len(d.core.busy()))
    picks("restart", len(d.core.busy()))
    picks("cut", len([w for w in d.core.workers if w.txn is not None or w.waiting]))
    if d.can_sweep():
        out.extend(Step("sweep", {"after": a}) for a in ("now", "past-lease-end"))
    out.extend(Step("time_passes", {"to": t}) for t in TIMES)
    levels = _levels(d.core.h.isolation)
    if d.can_open_transaction():
        for level in levels:
            idle = len([w for w in d.core.workers if w.can_act and w.txn is None])
            picks("open_transaction", idle, **_level(level))
    if d.can_close_transaction():
        holding = len([w for w in d.core.workers if w.can_act and w.txn is not None])
        for commit in (True, False):
            picks("close_transaction", holding, commit=commit)
    if preempted < scope.preemptions and d.can_preempt():
        for after in AFTERS:
            picks("preempt", len(d._preemptible()), after=after)
    picks("resume_call", len(d.core.parked()))
    picks("time_out", len(d.calls.timeouts.armable()))
    return out


def _levels(mode: str) -> tuple[str | None, ...]:
    """Return the levels a held transaction is opened at under `mode` (None: the default
    machine's, which names none)."""
    if mode == isolation.DEFAULT:
        return (None,)
    return isolation.LEVELS if mode == "drawn" else (mode.replace("-", " "),)


def _level(level: str | None) -> dict[str, str]:
    return {} if level is None else {"level": level}


QUERIES = load(Path(__file__).with_name("explore.sql"))


class Tables:
    """Reads a digest of every row of the tables there are when the search starts (the
    queue's and the harness's), in one round trip.

    Two programs whose model and `state()` agree may still have left different rows:
    a stale failure report that moved the owner's lease end shows nowhere else. Merging
    them would skip what follows the second, and "no violation in scope" would not be
    true, so the rows (in heap order) are part of the state. Session state a queue
    keeps outside its tables (advisory locks, settings) is not, nor a table it creates
    only later (a partition made on enqueue). Nor are the columns named in `ignored`: a
    random id or a real-time stamp differs on every run of one program, and would keep
    every state apart.
    """

    def __init__(self, conn: Connection[Any], ignored: Iterable[str] = ()) -> None:
        tables = list(conn.execute(QUERIES["tables"].text))
        rows = sql.SQL(QUERIES["rows"].text)
        self.statement = sql.SQL("\nunion all\n").join(
            sql.SQL("(")
            + rows.format(
                table=sql.Identifier(schema, name),
                ignored=sql.Literal(_left_out(schema, name, ignored)),
            )
            + sql.SQL(")")
            for schema, name in tables
        )
        self.empty = not tables

    def digest(self, conn: Connection[Any]) -> tuple[str, ...]:
        """Return one digest per table, in a fixed order."""
        if self.empty:
            return ()
        return tuple(row[0] for row in conn.execute(self.statement))


HARNESS_STAMPS = {("leasecheck", "clock_moves"): ["since"]}
"""The harness's own real-time columns: when each clock move was made (the simulated
instants it moved to stay in the state)."""


def _left_out(schema: str, table: str, ignored: Iterable[str]) -> list[str]:
    """Return the columns of `schema.table` left out of its digest: each NAME and each
    TABLE.NAME of `ignored` that names this table, and the harness's real-time stamps."""
    out = list(HARNESS_STAMPS.get((schema, table), []))
    for name in ignored:
        where, dot, column = name.rpartition(".")
        if not dot or where in (table, f"{schema}.{table}"):
            out.append(column)
    return sorted(set(out))


def fingerprint(d: Driver, tables: Tables | None = None) -> Hashable:
    """Return the state a program ended in: the model, what the queue shows, and (with
    `tables`) every row it keeps."""
    workers = tuple(
        (
            w.paused,
            w.crashed,
            w.txn is not None,
            w.level if w.txn is not None else "",
            w.began if w.txn is not None else -1,  # its now(): the move in force then
            w.known_as,  # a restart under the old name and a crash leave alike rows
            w.waiting is not None,
            w.main.parked,
            tuple((h.label, h.grant is not None, h.believed, h.next_beat) for h in w.held),
        )
        for w in d.core.workers
    )
    jobs = tuple(
        (tuple((g.label, g.lease_end, g.released) for g in job.grants), len(job.completed_by))
        for job in d.core.oracle.jobs.values()
    )
    shown = (
        tuple(d.core.observe(j) for j in d.core.oracle.jobs)
        if d.core.caps.state is not None
        else ()
    )
    sweeper = d.core.sweeper is not None and d.core.sweeper.waiting is not None
    rows = tables.digest(d.core.pool.monitor) if tables is not None else ()
    return (
        d.core.now,
        workers,
        jobs,
        shown,
        tuple(sorted(d.core.scheduler.armed.items())),
        sweeper,
        rows,
    )


def _run(
    harness: Harness, steps: list[Step], scope: Scope, tables: Tables | None = None
) -> tuple[Hashable, list[Step]]:
    """Run `steps` on a fresh driver, judging after each and at the end; return the state it
    reached and the moves it offers next. A broken property raises."""
    harness.reset()
    d = Driver(harness)
    d.core.program.extend(steps)
    try:
        for step in steps:
            getattr(d, step.rule)(**step.args)
            d.check()
        preempted = sum(s.rule == "preempt" for s in steps)
        state, offered = fingerprint(d, tables), enabled(d, scope, preempted)
    except BaseException:
        d.core.clean_up()
        raise
    d.teardown()
    return state, offered


def explore(
    harness: Harness, scope: Scope, budget: float = 60.0, ignored: Iterable[str] = ()
) -> Outcome:
    """Search `scope` breadth first within `budget` seconds; the columns named in
    `ignored` are not part of a state (see `Tables`)."""
    started = time.monotonic()
    done = Outcome()
    seen: set[Hashable] = set()
    start = scope.start()
    tables = Tables(harness.pool.monitor, ignored)
    try:
        _, offered = _run(harness, start, scope, tables)
    except PropertyViolated as error:
        return _found(done, error, start, started)
    frontier = [(start, offered)]
    for depth in range(1, scope.moves + 1):
        deeper = []
        for prefix, moves in frontier:
            for move in moves:
                if time.monotonic() - started > budget:
                    done.complete = False
                    done.seconds = time.monotonic() - started
                    return done
                steps = [*prefix, move]
                done.schedules += 1
                try:
                    state, offered = _run(harness, steps, scope, tables)
                except PropertyViolated as error:
                    return _found(done, error, steps, started)
                if state not in seen:
                    seen.add(state)
                    done.states += 1
                    deeper.append((steps, offered))
        frontier = deeper
        done.depth = depth
    done.seconds = time.monotonic() - started
    return done


def _found(done: Outcome, error: PropertyViolated, steps: list[Step], started: float) -> Outcome:
    done.violation, done.counterexample = error, steps
    done.seconds = time.monotonic() - started
    return done


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
    cmd.add_argument("--leasecheck-dir", default=".leasecheck", help="where failures go")
    cmd.set_defaults(run=command)


def command(args: Any) -> int:
    """Run `leasecheck explore`; print the closing line (and the counterexample)."""
    scope = Scope(args.workers, args.jobs, args.moves, args.preemptions)
    if not (1 <= scope.workers <= 5 and 1 <= scope.jobs <= MAX_JOBS and scope.moves >= 1):
        print(
            f"leasecheck explore: give 1-5 workers, 1-{MAX_JOBS} jobs and at least 1 move",
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
        with janitor.temporary(server.dsn, "explore") as dsn:
            clock.prepare(dsn, queue)
            with clock.connect(dsn) as conn:
                problem = probe.clock_problem(queue, conn)
            if problem is not None:
                print(problem, file=sys.stderr)
                return 2
            pool = actors.Pool(dsn)
            harness = Harness(queue=queue, pool=pool, spec=args.queue, isolation=args.isolation)
            try:
                done = explore(harness, scope, args.seconds, args.ignore_column)
            finally:
                pool.close()
    finally:
        server.stop()
    if done.violation is not None:
        print(str(done.violation))
        print("\n".join(str(s) for s in done.counterexample))
        written = harness.recorder.write(Path(args.leasecheck_dir), queue.name, args.queue)
        for path in (p for p in written if p.suffix == ".json"):
            print(f"leasecheck: saved {path}; replay it with: leasecheck replay {path}")
    print(f"leasecheck explore: {done.said(scope)}")
    return 1 if done.violation is not None else (0 if done.complete else 3)


__all__ = ["Outcome", "Scope", "add_parser", "command", "enabled", "explore", "fingerprint"]
