"""Count round trips on the wire: what a step's SQL needs, read from libpq's own trace.

Every statement the client sends ends in one ReadyForQuery from the server; that
message is one round trip, whatever protocol psycopg chose. `Wire` wraps
`stateful.clock.connect` so that every connection the harness opens writes a libpq
trace to a file of its own; `counts()` reads them back and sorts each round trip
into a kind, by the statement that asked for it.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from psycopg import Connection
from psycopg.pq import Trace

from stateful import clock

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


MESSAGE = re.compile(r"^([FB])\t\d+\t(\w+)\t?(.*)$")
"""One message in a libpq trace: direction, length, type, then its fields; a
statement's text may run on over the lines after it."""


@dataclass
class Wire:
    """Round trips by kind, over every connection opened while `traced()` is active."""

    counts: Counter[str] = field(default_factory=Counter)

    @contextmanager
    def traced(self) -> Iterator[None]:
        """Make `clock.connect` trace what it opens; count the traces on the way out.

        The connections must be closed by then: libpq writes each trace through a
        line-buffered stream of its own, so a closed connection's file is complete.
        """
        original: Callable[..., Connection[Any]] = clock.connect
        sinks: list[IO[str]] = []
        with tempfile.TemporaryDirectory(prefix="leasecheck-wire-") as directory:

            def connect(dsn: str, **kwargs: Any) -> Connection[Any]:
                conn = original(dsn, **kwargs)
                sink = (Path(directory) / f"{len(sinks)}.trace").open("w")
                sinks.append(sink)  # kept open: libpq writes to its file descriptor
                conn.pgconn.trace(sink.fileno())
                conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
                return conn

            clock.connect = connect
            try:
                yield
            finally:
                clock.connect = original
                for sink in sinks:
                    sink.close()
                    self.counts.update(count(Path(sink.name).read_text(errors="replace")))


def count(trace: str) -> Counter[str]:
    """Return the round trips in one connection's trace, by kind."""
    total: Counter[str] = Counter()
    statement, prepared = "", {}
    for direction, message, rest in _messages(trace):
        if direction == "F" and message == "Query":
            statement = rest
        elif direction == "F" and message == "Parse":
            name, _, text = rest.partition(" ")
            statement = prepared[name] = text
        elif direction == "F" and message == "Bind":
            name = rest.split(" ", 2)[1]  # after the portal's name
            statement = prepared.get(name, statement)
        elif direction == "B" and message == "ReadyForQuery":
            total[kind(statement)] += 1
    return total


def _messages(trace: str) -> Iterator[tuple[str, str, str]]:
    """Yield (direction, type, fields) per message, joining a statement's later lines."""
    current: list[str] | None = None
    for line in trace.splitlines():
        match = MESSAGE.match(line)
        if match is None:
            if current is not None:
                current[2] += "\n" + line
            continue
        if current is not None:
            yield current[0], current[1], current[2].strip()
        current = [match[1], match[2], match[3]]
    if current is not None:
        yield current[0], current[1], current[2].strip()
