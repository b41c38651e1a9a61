"""Count round trips on the wire: what a step's SQL needs, read from libpq's own trace.

Every statement the client sends ends in one ReadyForQuery from the server; that
message is one round trip, whatever protocol psycopg chose. `Wire` wraps
`stateful.clock.connect` so that every connection the harness opens writes a libpq
trace to a file of its own; on the way out it reads them back, sorts each round
trip into a kind by the statement that asked for it, and keeps how long each took:
from the client's first message to the server's ReadyForQuery, by libpq's clock.
"""

from __future__ import annotations

import itertools
import re
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from psycopg import Connection
from psycopg.pq import Trace

from leasecheck.stateful import clock

KINDS = {
    "pg_blocking_pids": "lock watch",
    "leasecheck.effects": "oracle",
    "leasecheck.clock": "clock",
    "pg_terminate_backend": "crash/cut",
    "pg_cancel_backend": "crash/cut",
    "pg_stat_activity": "crash/cut",
    "deadlock_timeout": "connect",
}
"""Harness statements by a word they contain; all else is the queue's own work."""

NEEDED = ("queue", "oracle", "clock", "crash/cut")
"""The kinds a step cannot do without: the calls under test and the checks on them.
Lock watch (polling `pg_blocking_pids` while a call runs) and connection setup are
the harness's overhead, so they count against the step, not for it."""


def kind(statement: str) -> str:
    """Return the kind of round trip `statement` asked for."""
    return next((k for word, k in KINDS.items() if word in statement), "queue")


MESSAGE = re.compile(r"^(\S+ \S+)\t([FB])\t\d+\t(\w+)\t?(.*)$")
"""One message in a libpq trace: time, direction, length, type, then its fields; a
statement's text may run on over the lines after it."""


@dataclass
class Wire:
    """Round trips by kind, over every connection opened while `traced()` is active."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    """Each round trip's duration, by kind."""

    @property
    def counts(self) -> Counter[str]:
        """Round trips by kind."""
        return Counter({k: len(v) for k, v in self.seconds.items()})

    def median(self, kind: str) -> float:
        """The typical duration of one round trip of `kind`, in seconds.

        The median, because a call blocked on another worker's lock spans steps
        the machine spends elsewhere: that wait is the scenario, not the SQL.
        """
        return statistics.median(self.seconds[kind])

    @contextmanager
    def traced(self) -> Iterator[None]:
        """Make `clock.connect` trace what it opens; read the traces on the way out.

        The connections must be closed by then: libpq writes each trace through a
        line-buffered stream of its own, so a closed connection's file is complete.
        """
        original: Callable[..., Connection[Any]] = clock.connect
        sinks: list[IO[str]] = []
        numbers = itertools.count()  # the pool's opener thread connects too: no shared len()
        with tempfile.TemporaryDirectory(prefix="leasecheck-wire-") as directory:

            def connect(
                dsn: str, cls: type[Connection[Any]] = Connection, **kwargs: Any
            ) -> Connection[Any]:
                conn = original(dsn, cls, **kwargs)
                sink = (Path(directory) / f"{next(numbers)}.trace").open("x")
                sinks.append(sink)  # kept open: libpq writes to its file descriptor
                conn.pgconn.trace(sink.fileno())
                conn.pgconn.set_trace_flags(Trace.REGRESS_MODE)
                return conn

            clock.connect = connect
            try:
                yield
            finally:
                clock.connect = original
                for sink in sinks:
                    sink.close()
                    trace = Path(sink.name).read_text(errors="replace")
                    for kind_, seconds in round_trips(trace):
                        self.seconds.setdefault(kind_, []).append(seconds)


def round_trips(trace: str) -> Iterator[tuple[str, float]]:
    """Yield each round trip in one connection's trace: its kind and its seconds."""
    statement, prepared = "", {}
    sent: datetime | None = None
    for at, direction, message, rest in _messages(trace):
        if direction == "F" and sent is None:
            sent = at
        if direction == "F" and message == "Query":
            statement = rest
        elif direction == "F" and message == "Parse":
            name, _, text = rest.partition(" ")
            statement = prepared[name] = text
        elif direction == "F" and message == "Bind":
            name = rest.split(" ", 2)[1]  # after the portal's name
            statement = prepared.get(name, statement)
        elif direction == "B" and message == "ReadyForQuery":
            yield kind(statement), (at - (sent or at)).total_seconds()
            sent = None


def _messages(trace: str) -> Iterator[tuple[datetime, str, str, str]]:
    """Yield (time, direction, type, fields) per message, joining a statement's lines."""
    current: list[str] | None = None
    for line in trace.splitlines():
        match = MESSAGE.match(line)
        if match is None:
            if current is not None:
                current[3] += "\n" + line
            continue
        if current is not None:
            yield _message(current)
        current = list(match.groups())
    if current is not None:
        yield _message(current)


def _message(fields: list[str]) -> tuple[datetime, str, str, str]:
    at, direction, message, rest = fields
    return datetime.fromisoformat(at), direction, message, rest.strip()
