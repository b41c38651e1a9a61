"""A throwaway database with the harness and the reference schema, for benchmarks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from leasecheck.dbfixtures import embedded, janitor
from leasecheck.stateful import clock, contract
from leasecheck.stateful.contract import Queue

REFERENCE = "leasecheck.reference.queue:ReferenceQueue"


@contextmanager
def reference_database(pg_dsn: str | None, spec: str | Queue = REFERENCE) -> Iterator[str]:
    """Yield a DSN for a fresh database with the schema of the queue `spec` (a
    `module:attr` spec or the queue itself; the reference's by default); drop it (and
    the server)."""
    server = None if pg_dsn else embedded.start()
    try:
        with janitor.temporary(pg_dsn or (server.dsn if server else ""), "bench") as dsn:
            clock.prepare(dsn, contract.load(spec) if isinstance(spec, str) else spec)
            yield dsn
    finally:
        if server is not None:
            server.stop()
