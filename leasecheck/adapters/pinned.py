"""An async pool, connection and cursor on the harness's one sync connection.

Libraries written on psycopg's `AsyncConnectionPool` (saq, chancy, oban, ...) ask for a
pool and borrow connections from it. The harness owns exactly one sync connection per
worker and must see every statement on it: that is how it detects lock waits and how
it crashes a worker mid-transaction. `PinnedPool(conn)` is the pool such a library
accepts, lending that connection as an async one:

```python
from leasecheck.adapters.pinned import PinnedPool

def claim(self, conn, worker, lease):
    pool = PinnedPool(conn)                    # stands in for AsyncConnectionPool
    queue = LibraryQueue(pool=pool)            # the library's own object, on it
    return asyncio.run(queue.dequeue())        # its own statements, on conn
```

The API is psycopg_pool's `AsyncConnectionPool` where a library reads it, and stable:

- `async with pool.connection() as c` (and `getconn()` / `putconn(c)`) lends a
  `PinnedConnection`, always the same one. Leaving the block neither commits nor rolls
  back: transactions stay the library's (`async with c.transaction():`) and the
  harness's.
- `pool.kwargs` is the connection keyword arguments as psycopg_pool keeps them
  (`{"autocommit": ...}`, the connection's own value; a library may read and even set
  it, as saq does); `conninfo`, `name`, `min_size` / `max_size` (1), `timeout`,
  `closed`.
- `open()`, `close()`, `wait()`, `resize()`, `check()`, `drain()`, `get_stats()`,
  `pop_stats()`, `async with pool:`: open and close change only `closed` (a closed
  pool refuses to lend, with `PoolClosed`, which is psycopg_pool's own when
  psycopg_pool is installed); the harness's connection is never opened or closed here.
- `pool.conn` is the `PinnedConnection`, and `pool.last_status` / `pool.last_rowcount`
  the status line and row count of the latest statement run through the pool (a
  library that discards them, as most do, still answered them: an adapter may read
  whether its UPDATE matched a row).

`PinnedConnection` has `execute`, `cursor` (`row_factory` and psycopg's other
arguments), `transaction`, `pipeline`, `commit`, `rollback`, `autocommit`, `info`,
`adapters`, `closed`, `broken` and `sync` (the harness's connection itself).
`PinnedCursor` has `execute`, `executemany`, `fetchone`, `fetchmany`, `fetchall`,
`async for`, `stream`, `copy` (`write`, `write_row`, `read`, `read_row`, `rows`,
`set_types`), `rowcount`, `statusmessage`, `description`, `nextset` and `close`. Each
call runs at once on the sync connection: a statement that waits on a lock blocks the
event loop, which is what the harness needs to see it waiting. `notifies()` raises
`NotImplementedError`: LISTEN needs a connection of its own, which the harness does
not give a worker.

A real pool lends a second connection to a borrow nested inside another; this one has
one session to lend, so by default a nested `pool.connection()` is that same session
(the inner block's transaction is the outer's: its commit commits the outer's work
too). A library that nests borrows for independent transactions is then not run as
its users run it: `PinnedPool(conn, nested="refuse")` makes a nested borrow raise
`NestedBorrow`, so an adapter author finds out at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from psycopg import Connection, Copy, Pipeline

from leasecheck.adapters._pinbase import (
    NestedBorrow,
    PoolClosed,
    _ConnectionFace,
    _CursorFace,
    _PoolFace,
)

__all__ = ["NestedBorrow", "PinnedConnection", "PinnedCursor", "PinnedPool", "PoolClosed"]


class PinnedCursor(_CursorFace):
    """An async face on one sync cursor of the harness's connection."""

    async def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None
    ) -> PinnedCursor:
        self._execute(query, params, prepare=prepare, binary=binary)
        return self

    async def executemany(self, query: Any, params: Iterable[Any], returning: bool = False) -> None:
        self._executemany(query, params, returning=returning)

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int = 0) -> list[Any]:
        return self._cursor.fetchmany(size)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def stream(
        self, query: Any, params: Any = None, *, binary: bool | None = None
    ) -> AsyncIterator[Any]:
        """Rows as the server sends them, one at a time (psycopg's `stream`)."""
        for row in self._cursor.stream(query, params, binary=binary):
            yield row

    @asynccontextmanager
    async def copy(
        self, statement: Any, params: Any = None, **kwargs: Any
    ) -> AsyncIterator[PinnedCopy]:
        """COPY FROM STDIN or TO STDOUT on the harness's connection (psycopg's `copy`)."""
        with self._cursor.copy(statement, params, **kwargs) as copy:
            yield PinnedCopy(copy)
        self._last.saw(self._cursor)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._rows()

    async def _rows(self) -> AsyncIterator[Any]:
        for row in self._cursor:
            yield row

    async def close(self) -> None:
        self._cursor.close()

    async def __aenter__(self) -> PinnedCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()


class PinnedCopy:
    """An async face on one sync COPY of the harness's connection."""

    def __init__(self, copy: Copy) -> None:
        self._copy = copy

    async def write(self, buffer: Any) -> None:
        self._copy.write(buffer)

    async def write_row(self, row: Any) -> None:
        self._copy.write_row(row)

    async def read(self) -> Any:
        return self._copy.read()

    async def read_row(self) -> Any:
        return self._copy.read_row()

    async def rows(self) -> AsyncIterator[Any]:
        for row in self._copy.rows():
            yield row

    def set_types(self, types: Any) -> None:
        self._copy.set_types(types)


class PinnedPipeline:
    """An async face on one sync pipeline of the harness's connection."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    async def sync(self) -> None:
        self._pipeline.sync()


class PinnedConnection(_ConnectionFace):
    """An async face on the harness's sync connection."""

    async def set_autocommit(self, value: bool) -> None:
        """The harness owns the connection's mode: only its current value is accepted."""
        self._keep_autocommit(value)

    async def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool = False
    ) -> PinnedCursor:
        cursor = PinnedCursor(self._conn.cursor(), self._last)
        return await cursor.execute(query, params, prepare=prepare, binary=binary)

    def cursor(self, *args: Any, **kwargs: Any) -> PinnedCursor:
        """A cursor, with psycopg's arguments (`row_factory=`, a name for a server cursor)."""
        if kwargs.get("row_factory", ...) is None:
            del kwargs["row_factory"]
        return PinnedCursor(self._conn.cursor(*args, **kwargs), self._last)

    @asynccontextmanager
    async def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> AsyncIterator[Any]:
        with self._conn.transaction(savepoint_name, force_rollback) as tx:
            yield tx

    @asynccontextmanager
    async def pipeline(self) -> AsyncIterator[PinnedPipeline]:
        """Pipeline mode on the harness's connection (psycopg's `pipeline`): each sync
        still passes the harness's gates, so a pipelined call can be paused too."""
        with self._conn.pipeline() as pipeline:
            yield PinnedPipeline(pipeline)

    async def commit(self) -> None:
        self._conn.commit()

    async def rollback(self) -> None:
        self._conn.rollback()

    async def __aenter__(self) -> PinnedConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Leaving does not close the harness's connection."""


class PinnedPool(_PoolFace[PinnedConnection]):
    """psycopg_pool's `AsyncConnectionPool`, lending only the harness's connection."""

    _home = "leasecheck.adapters.pinned"

    def __init__(
        self,
        conn: Connection[Any],
        *,
        kwargs: dict[str, Any] | None = None,
        name: str = "pinned",
        nested: str = "share",
    ) -> None:
        super().__init__(name=name, nested=nested)
        self.conn = PinnedConnection(conn, self._last)
        self.kwargs = {"autocommit": conn.autocommit, **(kwargs or {})}

    async def open(self, wait: bool = False, timeout: float = 30.0) -> None:
        self._closed = False

    async def close(self, timeout: float = 5.0) -> None:
        """Close the pool's face; the harness's connection stays open."""
        self._closed = True

    async def wait(self, timeout: float = 30.0) -> None:
        """Nothing to wait for: the one connection is there."""

    async def resize(self, min_size: int, max_size: int | None = None) -> None:
        """Accepted and ignored: the pool holds one connection, the harness's."""

    async def check(self) -> None:
        """Nothing to check: the harness watches its connection."""

    async def drain(self) -> None:
        """Nothing to drain."""

    @staticmethod
    async def check_connection(conn: PinnedConnection) -> None:
        await conn.execute("select 1")

    async def getconn(self, timeout: float | None = None) -> PinnedConnection:
        return self._lend()

    async def putconn(self, conn: PinnedConnection) -> None:
        """Taken back as it is: no commit, no rollback."""
        self._take_back()

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[PinnedConnection]:
        conn = await self.getconn(timeout)
        try:
            yield conn
        finally:
            await self.putconn(conn)

    async def __aenter__(self) -> PinnedPool:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
