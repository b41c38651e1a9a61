"""A throwaway database with the harness and the reference schema, for benchmarks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from leasecheck.dbfixtures import embedded, janitor
from leasecheck.stateful import clock, contract


@contextmanager
def reference_database(pg_dsn: str | None) -> Iterator[str]:
    """Yield a DSN for a fresh database with the reference schema; drop it (and the server)."""
    server = None if pg_dsn else embedded.start()
    try:
        with janitor.temporary(pg_dsn or (server.dsn if server else ""), "bench") as dsn:
            clock.prepare(dsn, contract.load("leasecheck.reference.queue:ReferenceQueue"))
            yield dsn
    finally:
        if server is not None:
            server.stop()
