"""A sync pool, connection and cursor on the harness's one connection.

Libraries written on psycopg_pool's sync `ConnectionPool` (dramatiq-postgres and the
like) ask for a pool and borrow connections from it. The harness owns exactly one sync
connection per worker and must see every statement on it: that is how it detects lock
waits, pauses a call between two statements, cancels a call past its deadline and
crashes a worker mid-transaction. `PinnedSyncPool(conn)` is the pool such a library
accepts, lending that connection. It is the sync counterpart of
`leasecheck.adapters.pinned.PinnedPool`, which does the same for `AsyncConnectionPool`,
and replaces the shim each adapter author used to write by hand:

```python
from leasecheck.adapters.pinned_sync import PinnedSyncPool

def complete(self, conn, claim, effect):
    pool = PinnedSyncPool(conn)                 # stands in for ConnectionPool
    broker = LibraryBroker(pool=pool)           # the library's own object, on it
    broker.ack(claim.job_id)                    # its own statements, on conn
    return pool.last_rowcount == 1              # did its UPDATE match the row?
```

The API is psycopg_pool 3.3's `ConnectionPool` where a library reads it:

- `with pool.connection() as c` (and `c = pool.getconn()` / `pool.putconn(c)`) lends a
  `PinnedSyncConnection`, always the same one, on the harness's connection. Leaving
  the block neither commits nor rolls back (see below). `putconn` of a connection this
  pool did not lend raises `ValueError`, as psycopg_pool does.
- `pool.kwargs` is the connection keyword arguments as psycopg_pool keeps them, with
  `"autocommit"` the harness connection's own value (a library may read it to decide
  whether to open transactions; giving a different one raises `ValueError`). A
  `"row_factory"` given there is the lent connection's default, as a real pool's
  connections would have it; other keywords are kept, not applied. `conninfo` (the
  harness connection's DSN), `name`, `min_size` / `max_size` (1), `timeout`, `closed`.
- `open()`, `close()`, `wait()`, `resize()`, `check()`, `drain()`, `get_stats()`,
  `pop_stats()`, `check_connection(c)` and `with pool:`. Open and close change only
  `closed`: a closed pool refuses `getconn()`, `connection()` and `wait()` with
  `PoolClosed`, which is psycopg_pool's own `PoolClosed` (when psycopg_pool is
  installed, as it is beside any library built on it) and the very class
  `leasecheck.adapters.pinned.PoolClosed`, so whichever a library or an adapter
  catches, it catches. The harness's connection is never opened or closed here.
- `pool.conn` is the `PinnedSyncConnection`, and `pool.last_status` /
  `pool.last_rowcount` the status line ("UPDATE 1") and row count of the latest
  statement run through the pool: a library that discards them, as most do, still
  answered them, and an adapter may read whether the library's UPDATE matched a row.

`PinnedSyncConnection` has `execute`, `cursor` (`row_factory`, a name for a server-side
cursor, and psycopg's other arguments), `transaction` and `pipeline` (psycopg's own, on
the harness's connection), `commit`, `rollback`, `autocommit` (readable; setting it, or
`set_autocommit`, to anything but its current value raises), `row_factory`, `info`,
`pgconn`, `adapters`, `closed`, `broken`, `close` (which closes nothing), `with c:`
(which ends nothing) and `sync` (the harness's connection itself). `PinnedSyncCursor`
has `execute`, `executemany`, `fetchone`, `fetchmany`, `fetchall`, iteration, `stream`,
`copy` (psycopg's `Copy`), `scroll`, `rowcount`, `rownumber`, `statusmessage`,
`description`, `nextset`, `close`, `closed`, `connection` and `with cur:`. Every
statement runs at once on the harness's connection. `notifies()` raises
`NotImplementedError`: LISTEN needs a connection of its own, which the harness does
not give a worker. Anything else a library reaches for is missing on purpose (an
`AttributeError` tells the adapter author at once) rather than forwarded unseen.

How this differs from psycopg_pool, and why. psycopg_pool's `connection()` enters the
borrowed connection's own context, so leaving it calls `commit()` on a clean exit and
`rollback()` on an error. Outside a `with conn.transaction():` block, each ends
whatever transaction the session has open: on the harness's autocommit connection that
is a transaction opened by a `BEGIN` statement, which is exactly how the harness holds
one open across a call (to keep its locks while other workers move, or to crash the
worker in the middle of it); inside such a block each raises `ProgrammingError`. Then
`putconn()` rolls back a connection returned in a transaction and runs the pool's
`reset` callback, `getconn()` runs its `check` callback, and a connection the library
closed (or broke) is replaced by a new one. Here the harness owns transaction ends: the
held transaction must still be open when the call returns, so that the harness, not the
pool, commits it, rolls it back or kills the session. So leaving a borrow (cleanly or
on an error, which goes up as it is), `putconn()`, and `close()` or `with c:` on the
lent connection do nothing to the session; no callback runs; the next borrow gets the
same session in whatever state the last one left it, broken or not. Transactions the
library opens itself are psycopg's own and behave as with a real pool: `with
c.transaction():` commits on the harness's idle autocommit session, and is a savepoint
inside a transaction the harness holds (so the library's work stays the harness's to
commit or undo). The difference shows only for a library that relies on the pool to
end a transaction it left open, or to replace a connection it closed or broke.

A real pool lends a second connection to a borrow nested inside another; this one has
one session to lend, so by default a nested `pool.connection()` is that same session
(the inner block's transaction is the outer's: its commit commits the outer's work
too). A library that nests borrows for independent transactions is then not run as
its users run it: `PinnedSyncPool(conn, nested="refuse")` makes a nested borrow raise
`NestedBorrow` (the same class as `leasecheck.adapters.pinned`'s), so an adapter author
finds out at once.

For adapter authors: turn off the library's own reconnect and retry loops. Libraries
built on a pool often retry a statement that failed on a broken connection (a
`tenacity` decorator, a `while True: try/except OperationalError` reconnect loop, a
`retries=` or `reconnect=` setting), trusting the pool to hand them a fresh connection.
Through this pool they get the same session back every time, dead if the harness cut
it: such a library retries forever, and the run hangs until leasecheck's call deadline
(`--leasecheck-call-deadline`, 30 s by default) cancels the call's statement and, the
call going on regardless, stops the run with no verdict. Configure the library to give up at once
(zero retries, no reconnect, `stop=stop_after_attempt(1)`) and let the error answer the
call: the harness expects a crashed worker's call to raise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from psycopg import Connection, Copy, Cursor, Pipeline, Transaction
from psycopg.rows import RowFactory

from leasecheck.adapters._pinbase import (
    NestedBorrow,
    PoolClosed,
    _ConnectionFace,
    _CursorFace,
    _Last,
    _PoolFace,
)

__all__ = [
    "NestedBorrow",
    "PinnedSyncConnection",
    "PinnedSyncCursor",
    "PinnedSyncPool",
    "PoolClosed",
]


class PinnedSyncCursor(_CursorFace):
    """One cursor of the harness's connection, telling its pool each statement's result."""

    def __init__(self, cursor: Cursor[Any], connection: PinnedSyncConnection, last: _Last) -> None:
        super().__init__(cursor, last)
        self._connection = connection

    @property
    def connection(self) -> PinnedSyncConnection:
        """The lent connection (not the harness's: closing it closes nothing)."""
        return self._connection

    @property
    def rownumber(self) -> int | None:
        return self._cursor.rownumber

    @property
    def closed(self) -> bool:
        return self._cursor.closed

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None
    ) -> PinnedSyncCursor:
        self._execute(query, params, prepare=prepare, binary=binary)
        return self

    def executemany(
        self, query: Any, params_seq: Iterable[Any], *, returning: bool = False
    ) -> None:
        self._executemany(query, params_seq, returning=returning)

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchmany(self, size: int = 0) -> list[Any]:
        return self._cursor.fetchmany(size)

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def scroll(self, value: int, mode: str = "relative") -> None:
        self._cursor.scroll(value, mode)

    def stream(
        self, query: Any, params: Any = None, *, binary: bool | None = None
    ) -> Iterator[Any]:
        """Rows as the server sends them, one at a time (psycopg's `stream`)."""
        yield from self._cursor.stream(query, params, binary=binary)
        self._last.saw(self._cursor)

    @contextmanager
    def copy(self, statement: Any, params: Any = None, **kwargs: Any) -> Iterator[Copy]:
        """COPY FROM STDIN or TO STDOUT on the harness's connection (psycopg's `copy`)."""
        with self._cursor.copy(statement, params, **kwargs) as copy:
            yield copy
        self._last.saw(self._cursor)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    def close(self) -> None:
        self._cursor.close()

    def __enter__(self) -> PinnedSyncCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.close()


class PinnedSyncConnection(_ConnectionFace):
    """The harness's sync connection, lent: its statements, not its ends."""

    def __init__(
        self,
        conn: Connection[Any],
        last: _Last | None = None,
        row_factory: RowFactory[Any] | None = None,
    ) -> None:
        super().__init__(conn, last)
        self._row_factory: RowFactory[Any] = row_factory or conn.row_factory

    @property  # settable here, so redefined (mypy does not follow `@Base.prop.setter`)
    def autocommit(self) -> bool:
        return self._conn.autocommit

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self.set_autocommit(value)

    def set_autocommit(self, value: bool) -> None:
        """The harness owns the connection's mode: only its current value is accepted."""
        self._keep_autocommit(value)

    @property
    def row_factory(self) -> RowFactory[Any]:
        """The lent connection's default row factory (the pool's `kwargs["row_factory"]`,
        else the harness connection's); setting it leaves the harness's alone."""
        return self._row_factory

    @row_factory.setter
    def row_factory(self, factory: RowFactory[Any]) -> None:
        self._row_factory = factory

    @property
    def pgconn(self) -> Any:
        return self._conn.pgconn

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool = False
    ) -> PinnedSyncCursor:
        return self.cursor().execute(query, params, prepare=prepare, binary=binary)

    def cursor(self, *args: Any, **kwargs: Any) -> PinnedSyncCursor:
        """A cursor, with psycopg's arguments (`row_factory=`, a name for a server cursor)."""
        if kwargs.get("row_factory") is None:
            kwargs["row_factory"] = self._row_factory
        return PinnedSyncCursor(self._conn.cursor(*args, **kwargs), self, self._last)

    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> AbstractContextManager[Transaction]:
        """psycopg's own transaction block (a savepoint inside another) on the session."""
        return self._conn.transaction(savepoint_name, force_rollback)

    @contextmanager
    def pipeline(self) -> Iterator[Pipeline]:
        """Pipeline mode on the harness's connection (psycopg's `pipeline`): each sync
        still passes the harness's gates, so a pipelined call can be paused too."""
        with self._conn.pipeline() as pipeline:
            yield pipeline

    def commit(self) -> None:
        self._conn.commit()

    def rollback(self) -> None:
        self._conn.rollback()

    def close(self) -> None:
        """Closes nothing: the harness decides whether its connection lives."""

    def __enter__(self) -> PinnedSyncConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving neither commits, nor rolls back, nor closes (psycopg's would all three)."""


class PinnedSyncPool(_PoolFace[PinnedSyncConnection]):
    """psycopg_pool's sync `ConnectionPool`, lending only the harness's connection."""

    _home = "leasecheck.adapters.pinned_sync"

    def __init__(
        self,
        conn: Connection[Any],
        *,
        kwargs: dict[str, Any] | None = None,
        name: str = "pinned",
        nested: str = "share",
    ) -> None:
        super().__init__(name=name, nested=nested)
        given = dict(kwargs or {})
        if given.get("autocommit", conn.autocommit) != conn.autocommit:
            raise ValueError(
                f"kwargs autocommit={given['autocommit']!r}, but the harness's connection has "
                f"autocommit={conn.autocommit}: a pinned pool lends it as it is"
            )
        self.conn = PinnedSyncConnection(conn, self._last, given.get("row_factory"))
        self.kwargs = {**given, "autocommit": conn.autocommit}
        self.close_returns = False

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} on backend {self.conn.info.backend_pid}>"

    def open(self, wait: bool = False, timeout: float = 30.0) -> None:
        """Open the pool's face again (a real pool cannot be reopened; this one can)."""
        self._closed = False

    def close(self, timeout: float = 5.0) -> None:
        """Close the pool's face; the harness's connection stays open."""
        self._closed = True

    def wait(self, timeout: float = 30.0) -> None:
        """Nothing to wait for: the one connection is there (a closed pool refuses)."""
        self._refuse_if_closed()

    def resize(self, min_size: int, max_size: int | None = None) -> None:
        """Accepted and ignored: the pool holds one connection, the harness's."""

    def check(self) -> None:
        """Nothing to check: the harness watches its connection."""

    def drain(self) -> None:
        """Nothing to drain."""

    @staticmethod
    def check_connection(conn: PinnedSyncConnection) -> None:
        conn.execute("select 1")

    def getconn(self, timeout: float | None = None) -> PinnedSyncConnection:
        return self._lend()

    def putconn(self, conn: PinnedSyncConnection) -> None:
        """Taken back as it is: no commit, no rollback, no reset."""
        if conn is not self.conn:
            raise ValueError(
                f"can't return connection to pool {self.name!r}, it doesn't come from it: {conn}"
            )
        self._take_back()

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[PinnedSyncConnection]:
        """Lend the harness's connection; leaving neither commits nor rolls back."""
        conn = self.getconn(timeout)
        try:
            yield conn
        finally:
            self.putconn(conn)

    def __enter__(self) -> PinnedSyncPool:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
