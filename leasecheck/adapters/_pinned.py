"""An async face on the harness's one sync connection, for libraries whose API is async.

oban and chancy talk to PostgreSQL through an async pool; the harness owns exactly
one sync connection per worker and must see every statement on it (that is how it
detects lock waits and crashes a worker mid-transaction). These classes give those
libraries the pool, connection and cursor they ask for, each call running at once on
the harness's connection. Only what the two libraries use is here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from psycopg import Connection, Cursor


class PinnedCursor:
    """An async face on one sync cursor."""

    def __init__(self, cursor: Cursor[Any]) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    async def execute(self, query: Any, params: Any = None) -> PinnedCursor:
        self._cursor.execute(query, params)
        return self

    async def executemany(self, query: Any, params: Iterable[Any], returning: bool = False) -> None:
        self._cursor.executemany(query, params, returning=returning)

    def nextset(self) -> bool | None:
        return self._cursor.nextset()

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def __aenter__(self) -> PinnedCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()


class PinnedConnection:
    """An async face on the harness's sync connection."""

    def __init__(self, conn: Connection[Any]) -> None:
        self._conn = conn

    async def execute(self, query: Any, params: Any = None) -> PinnedCursor:
        return await PinnedCursor(self._conn.cursor()).execute(query, params)

    def cursor(self, row_factory: Any = None) -> PinnedCursor:
        if row_factory is None:
            return PinnedCursor(self._conn.cursor())
        return PinnedCursor(self._conn.cursor(row_factory=row_factory))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        with self._conn.transaction():
            yield


class PinnedPool:
    """A pool that always hands out the harness's connection."""

    def __init__(self, conn: Connection[Any]) -> None:
        self.conn = PinnedConnection(conn)

    async def open(self) -> None:
        """Nothing to open: the harness owns the connection."""

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[PinnedConnection]:
        yield self.conn
