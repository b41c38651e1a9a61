"""The exact state of a program: everything its future depends on, as one hashable value.

The explorer does not extend a program whose state it met before, so a state that
leaves out a part the future depends on prunes futures nobody explored, and "no
violation in scope" becomes a false proof (an armed lock timeout left out once merged
"armed, then claim" with "claim", and a 5-step counterexample went unexplored). So the
state takes in every part of the harness a later step reads: the clock; each actor
(paused, crashed, its held transaction and the updates and undos waiting on its end,
its call in flight and where it is paused, armed preemptions and lock timeouts, the
name the queue knows it by); the judge's beliefs (grants, leases, releases in flight,
answers still waiting on a verdict); the name the next restarted worker gets; what
`state()` shows; and every row of every table (`Tables`).

What it leaves out is what no future step reads: the story told so far, the
situations counted, the ids of calls (their order is kept), real time.
`tests/test_exhaustive.py` holds it to that: programs that reach one state are
continued alike, and must answer alike.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any

from psycopg import Connection, sql

from leasecheck.stateful.engine.actors import Session
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("state.sql"))


class Tables:
    """Reads a digest of every row of the tables there are when the search starts (the
    queue's and the harness's), and of what the planner believes of them, in one round
    trip.

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
            [
                *(
                    sql.SQL("(")
                    + rows.format(
                        table=sql.Identifier(schema, name),
                        ignored=sql.Literal(_left_out(schema, name, ignored)),
                    )
                    + sql.SQL(")")
                    for schema, name in tables
                ),
                sql.SQL("(")
                + sql.SQL(QUERIES["planner"].text).format(
                    tables=sql.Literal([sql.Identifier(*t).as_string(conn) for t in tables])
                )
                + sql.SQL(")"),
            ]
        )
        self.empty = not tables

    def sequences(self, conn: Connection[Any]) -> dict[str, int | None]:
        """Return where each sequence stands (None: not used since it was restarted)."""
        return {str(name): value for name, value in conn.execute(QUERIES["sequences"].text)}

    def digest(self, conn: Connection[Any]) -> tuple[str, ...]:
        """Return one digest per table, in a fixed order, and one of what the planner
        believes of them (`planner`)."""
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
    """Return the state a program ended in: the harness's part, what the queue shows,
    and (with `tables`) every row it keeps."""
    core = d.core
    shown = tuple(core.observe(j) for j in core.oracle.jobs) if core.caps.state is not None else ()
    rows = tables.digest(core.pool.monitor) if tables is not None else ()
    return (harness_state(d), shown, rows)


def harness_state(d: Driver) -> Hashable:
    """Return the harness's part of the state: what the driver, the scheduler, the faults
    and the judge hold that a later step reads."""
    core, scheduler, timeouts = d.core, d.core.scheduler, d.calls.timeouts
    refused = [c for c, (_, said) in core.completions.items() if said is False]
    flight = core.oracle.in_flight
    calls = _Ranks(
        [
            *scheduler.claims_in_flight, *refused, *core.voided,
            *flight.calls, *(c for w in flight.waiting for c in w.calls),
            *(c for w in core.actors() for c in w.txn_calls),
        ]
    )  # fmt: skip
    timing = any(s.times_out for w in core.actors() for s in (w.main, w.beat) if s is not None)
    return (
        core.now,
        tuple(_actor(w, core.now, calls) for w in core.actors()),
        _next(core.generation),  # the name the next fresh worker gets
        tuple(sorted(scheduler.armed.items())),
        tuple(sorted(scheduler.holds.items())),
        tuple(sorted((n, core.steps - s, h) for n, (s, h) in scheduler.pauses.items())),
        calls.all(scheduler.claims_in_flight),
        tuple(sorted(timeouts.armed)),
        tuple(sorted((h.label, _canon(v, calls)) for h, v in timeouts.timed_out.items())),
        tuple(sorted((calls.of(c), core.completions[c][0].label) for c in refused)),
        calls.all(core.voided),
        # what a call timed out on a lock looks back on (`LockTimeouts`), while one runs
        (len(core.ended), tuple(core.ended)) if timing else None,
        _oracle(core.oracle, calls),
    )


def _next(counter: Any) -> int:
    """Return the value an `itertools.count` gives next, without taking it."""
    return int(repr(counter).removeprefix("count(").removesuffix(")"))


class _Ranks:
    """Call ids by their order: two programs that reach one state sent different numbers
    of calls before, so the ids of the calls that still matter differ while their order
    does not."""

    def __init__(self, ids: Iterable[int]) -> None:
        self.rank = {c: i for i, c in enumerate(sorted(set(ids)))}

    def of(self, call: int) -> int:
        return self.rank[call]

    def all(self, calls: Iterable[int]) -> tuple[int, ...]:
        return tuple(sorted(self.of(c) for c in calls))


def _oracle(oracle: Any, calls: _Ranks) -> Hashable:
    """Return the judge's beliefs: each job's grants and fate, the claims in flight (by
    the order of their calls) and the verdicts waiting on them, the effects and keys
    seen, the doubts, the verdicts deferred."""
    flight = oracle.in_flight
    in_flight = (
        tuple((calls.of(c), flight.told_when_sent.get(c), flight.done_when_sent.get(c),
               flight.failed_when_sent.get(c))
              for c in sorted(flight.calls)),
        flight.lost,
        tuple((w.job_id, w.said, calls.all(w.calls), _canon(w.verdict, calls))
              for w in flight.waiting),
    )  # fmt: skip
    rest = tuple(
        (f.name, _canon(getattr(oracle, f.name), calls))
        for f in dataclasses.fields(oracle)
        if f.name not in _LEFT_OUT and f.name != "in_flight"
    )
    return (*rest, in_flight, _canon(oracle.ledger.deferred, calls))


def _actor(w: Worker, now: int, calls: _Ranks) -> Hashable:
    """Return a worker's (or the sweeper's) part: what it holds and what it is doing."""
    return (
        w.name,
        w.known_as,
        w.paused,
        w.crashed,
        None if w.txn is None else tuple(_canon(u, calls) for u in w.txn),
        tuple(_canon(u, calls) for u in w.undo),
        w.level,
        w.began - now if w.txn is not None else None,
        calls.all(w.txn_calls),
        tuple(h.label for h in w.snapshot),
        _canon(w.waiting, calls),
        _canon(w.beat_waiting, calls),
        _session(w.main),
        _session(w.beat),
        tuple(_held(h, now) for h in w.held),
    )


def _session(s: Session | None) -> Hashable:
    """Return where a session's call is: none, running or blocked, or paused after so many
    round trips (what its open transaction holds is in the rows, or not yet committed).
    The gate of a call that has returned is left out: the next call replaces it.

    A queue's own client (`contract.Clients`) remembers what it ran: psycopg prepares a
    statement at its fifth run, in a round trip of its own, so where a later pause lands
    depends on that history. The count of its connections' round trips so far is taken in:
    programs whose clients ran different numbers of round trips are kept apart. It is a
    count, not the statements: two that ran as many but different ones still merge."""
    if s is None:
        return None
    running = s.pending is not None and not s.pending.done()
    gate = s.gate if running else None
    history = None
    if s.client is not None and s.endpoint is not None:
        history = tuple(c.units_passed for c in s.endpoint.sessions())
    return (
        s.what if running else None,
        running,
        s.times_out,
        s.terminated,
        None if gate is None else (gate.after, gate.trips, gate.is_parked),
        history,
    )


def _held(h: Held, now: int) -> Hashable:
    return (
        h.label,
        h.grant is not None,
        h.believed,
        None if h.next_beat is None else h.next_beat - now,
    )


_INFRASTRUCTURE = {
    "Core", "Calls", "Driver", "Scheduler", "Judge", "Pool", "History", "LockTimeouts",
    "Harness", "Recorder", "Connection", "GatedConnection", "Oracle",
}  # fmt: skip
"""The harness's own machinery, met through a closure's `self`: its state is taken in
where it is kept (`harness_state`), never by walking it from a closure."""

_LEFT_OUT = {"ledger", "situations", "observe"}
"""Fields no later verdict reads: the words said so far and the situations counted."""


def _canon(value: Any, calls: _Ranks, seen: frozenset[int] = frozenset()) -> Hashable:
    """Return `value` as plain hashable data: a grant or claim by its label, a worker by
    its name, a closure by its code and what it captured, a record by its fields."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if id(value) in seen:
        return ("again", type(value).__name__)
    seen = seen | {id(value)}
    if type(value).__name__ in _INFRASTRUCTURE:
        return ("ref", type(value).__name__)
    if isinstance(value, Held):
        return ("held", value.label)
    if isinstance(value, Worker):
        return ("worker", value.name)
    if isinstance(value, Session):
        return ("session", value.label)
    if isinstance(value, functools.partial):
        args = tuple(_canon(a, calls, seen) for a in value.args)
        kw = tuple(sorted((k, _canon(v, calls, seen)) for k, v in value.keywords.items()))
        return ("partial", _canon(value.func, calls, seen), args, kw)
    if callable(value) and hasattr(value, "__code__"):
        cells = getattr(value, "__closure__", None) or ()
        captured = tuple(_canon(_cell(c), calls, seen) for c in cells)
        owner = getattr(value, "__self__", None)  # a bound method: its record, or its kind
        return ("code", value.__qualname__, captured, _canon(owner, calls, seen))
    if callable(value) and hasattr(value, "__self__"):  # a bound builtin
        return ("method", getattr(value, "__qualname__", repr(type(value))))
    if isinstance(value, Counter):
        return ("counter", tuple(sorted(value.items())))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple(
                (f.name, _canon(getattr(value, f.name), calls, seen))
                for f in dataclasses.fields(value)
                if f.name not in _LEFT_OUT
            ),
        )
    if isinstance(value, dict):
        items = [(_canon(k, calls, seen), _canon(v, calls, seen)) for k, v in value.items()]
        return ("dict", tuple(sorted(items, key=repr)))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((_canon(v, calls, seen) for v in value), key=repr)))
    if isinstance(value, (list, tuple)) or type(value).__name__ == "deque":
        return tuple(_canon(v, calls, seen) for v in value)
    if hasattr(value, "__dict__"):
        return (
            type(value).__name__,
            tuple(
                sorted(
                    (k, _canon(v, calls, seen))
                    for k, v in vars(value).items()
                    if k not in _LEFT_OUT and not k.startswith("__")
                )
            ),
        )
    # An address differs on every run (a lock's repr has one), and would keep apart
    # states that are one, or read differently on two runs of one program.
    return ("value", type(value).__name__, _ADDRESS.sub("", repr(value)))


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell: the closure's own name, not yet bound
        return None


__all__ = ["Tables", "fingerprint", "harness_state"]
