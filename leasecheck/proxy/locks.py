"""Which backends wait on a lock, asked on a connection of the proxy's own.

A lock wait sends nothing on the wire: the server just does not answer yet. Only the
server can say a backend waits on another, through `pg_blocking_pids`, which is how
PostgreSQL's isolationtester tells a blocked step from a slow one. The question goes
straight to the server, never through the proxy, so it is never held at a gate.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psycopg

from leasecheck.proxy.errors import ProxyError
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("locks.sql"))


class LockWatch:
    """A lazily opened control connection, shared by the controller's threads."""

    def __init__(self, dsn: str | None) -> None:
        self._dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def blocked(self, pids: list[int]) -> dict[int, tuple[int, ...]]:
        """Return, for each of `pids` waiting on a lock, the pids it waits for."""
        if not pids:
            return {}
        with self._lock:
            conn = self._connect()
            rows = conn.execute(QUERIES["blocked"].text, (pids,)).fetchall()
        return {int(pid): tuple(int(p) for p in by) for pid, by in rows}

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        if self._dsn is None:
            raise ProxyError(
                "wait_quiet needs a control connection to see lock waits: give the Proxy "
                "an upstream DSN, or control_dsn= with an upstream (host, port)"
            )
        self._conn = psycopg.connect(self._dsn, autocommit=True)
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
