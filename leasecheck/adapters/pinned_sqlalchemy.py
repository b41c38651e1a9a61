"""An SQLAlchemy engine on the harness's one connection, lent for one call at a time.

Libraries built on SQLAlchemy (DBOS and the like) ask for an `Engine` and check
connections out of it. The harness owns exactly one sync connection per worker and
must see every statement on it (that is how it detects lock waits, pauses a call
between two statements and crashes a worker mid-transaction), so the library must run
on that connection, as it does on the pinned pools (`leasecheck.adapters.pinned_sync`):

```python
from leasecheck.adapters.pinned_sqlalchemy import PinnedEngine

class MyLibQueue:
    def install(self, conn):
        ...                                     # the library's schema
        self.pin = PinnedEngine(conn)           # its engine: set up here, once

    def complete(self, conn, claim, effect):
        with self.pin.lending(conn) as engine:  # this call's statements, on conn
            library_ack(engine, claim.job_id)   # the library's own code, on the engine
        return self.pin.last_rowcount == 1      # did its UPDATE match the row?
```

Two things make an engine on that connection behave as the library's own would.

Transactions. SQLAlchemy speaks DBAPI: a transaction begins by itself before the
first statement and ends with `commit()` or `rollback()`. The harness's connection is
in autocommit, where `commit()` ends nothing and every statement commits at once, so
the library's `with engine.begin():` would not be atomic. The connection SQLAlchemy is
handed here begins one (`BEGIN`, at the isolation level SQLAlchemy asked for) before
the first statement after each end, and its `commit()` and `rollback()` end it. Inside
a transaction the harness holds open it takes a savepoint instead, which its end
releases or rolls back to: the library's work stays the harness's to commit, undo or
lose with a crash, as on a pinned pool. An engine (or connection) set to SQLAlchemy's
`AUTOCOMMIT` isolation level begins nothing.

When its set-up runs. An engine's first connection runs the dialect's set-up queries
(the server version, string quoting, the default schema and isolation level). Run
inside a call, they would be round trips that call makes only the first time a
session is used in the whole run, so a program would pause at another statement when
replayed on fresh sessions. `PinnedEngine(conn)` makes that first connection at once,
on the connection it is given (the adapter's `install`, outside any step); every later
checkout sends nothing but the library's statements. `use_native_hstore` is off (it
would look hstore up on every new connection).

The rest: `with pin.lending(conn) as engine` lends `conn` to the engine for the block
(each checkout inside it is that session; outside any block, a checkout raises
`RuntimeError`); a loan is the thread's own, as two workers' calls run at once, each on
its session's thread. `pin.last_status` and `pin.last_rowcount` are the status line and
row count of the latest statement the engine ran in this thread's latest loan, read
after it as within it (a library that discards them still answered them). Closing a
checked-out connection closes nothing: it rolls back the transaction it began, if one is
open, and the session stays the harness's. Turn off the library's reconnect and retry
loops, as for the pinned pools: through this engine it gets the same session back every
time, dead if the harness cut it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from threading import local
from typing import Any

import psycopg
from psycopg import Connection, Cursor
from psycopg.pq import TransactionStatus

from leasecheck.adapters._pinbase import _ConnectionFace, _CursorFace, _Last

try:
    from sqlalchemy import Engine, create_engine
    from sqlalchemy.pool import NullPool
except ImportError as exc:  # pragma: no cover - the module is for libraries built on it
    raise ImportError(
        "leasecheck.adapters.pinned_sqlalchemy needs SQLAlchemy 2: pip install 'sqlalchemy>=2'"
    ) from exc

__all__ = ["PinnedEngine"]

SAVEPOINT = "leasecheck_sqlalchemy"
"""The savepoint a transaction SQLAlchemy begins takes inside one the harness holds."""


class PinnedEngine:
    """An SQLAlchemy engine whose connections are the session lent to it (`lending`)."""

    def __init__(self, conn: Connection[Any], **engine_options: Any) -> None:
        """Build the engine and make its first connection on `conn` now (see the
        module's docstring); `engine_options` go to `sqlalchemy.create_engine`."""
        self._here = local()
        """What is lent on this thread, and the spy of its statements: two workers'
        calls run at once, each on the thread of its own session, and each checks out,
        and reads the results of, its own."""
        self.engine: Engine = create_engine(
            "postgresql+psycopg://",
            creator=self._checkout,
            poolclass=NullPool,
            use_native_hstore=False,
            **engine_options,
        )
        with self.lending(conn), self.engine.connect():
            pass

    @contextmanager
    def lending(self, conn: Connection[Any]) -> Iterator[Engine]:
        """Lend `conn` to the engine for the block, on this thread; yield the engine."""
        before = getattr(self._here, "lent", None)
        self._here.lent, self._here.last = conn, _Last()
        try:
            yield self.engine
        finally:
            self._here.lent = before

    @property
    def last_status(self) -> str | None:
        """The status line of the latest statement the engine ran on this thread's
        latest loan ("UPDATE 1")."""
        return self._spy().status

    @property
    def last_rowcount(self) -> int:
        """The row count of the latest statement the engine ran on this thread's latest
        loan (-1 before any)."""
        return self._spy().rowcount

    def _spy(self) -> _Last:
        last: _Last | None = getattr(self._here, "last", None)
        return _Last() if last is None else last

    def _checkout(self) -> _Borrowed:
        lent: Connection[Any] | None = getattr(self._here, "lent", None)
        if lent is None:
            raise RuntimeError(
                "the pinned engine was used outside `with pin.lending(conn)`: lend it the "
                "harness's connection for the call"
            )
        return _Borrowed(lent, self._spy())


class _Borrowed(_ConnectionFace):
    """The DBAPI connection SQLAlchemy checks out: the lent session, in DBAPI's manners."""

    def __init__(self, conn: Connection[Any], last: _Last) -> None:
        super().__init__(conn, last)
        self._own: str | None = None
        """What this connection began and must end: "begin", "savepoint", or None."""
        self._begins = True
        self.isolation_level: psycopg.IsolationLevel | None = None
        self.read_only: bool | None = None

    def cursor(self, *args: Any, **kwargs: Any) -> _BorrowedCursor:
        return _BorrowedCursor(self, self._conn.cursor(*args, **kwargs))

    def commit(self) -> None:
        """End the transaction this connection began, keeping its work."""
        own, self._own = self._own, None
        if own == "begin":
            self._conn.execute("commit")
        elif own == "savepoint":
            self._conn.execute(f"release savepoint {SAVEPOINT}")

    def rollback(self) -> None:
        """End the transaction this connection began, undoing its work (not the
        harness's, around a savepoint)."""
        own, self._own = self._own, None
        if own == "begin":
            self._conn.execute("rollback")
        elif own == "savepoint":
            self._conn.execute(f"rollback to savepoint {SAVEPOINT}; release savepoint {SAVEPOINT}")

    def close(self) -> None:
        """Close nothing: roll back what this connection began, if still open."""
        if self._own is not None and not self._conn.closed:
            self.rollback()

    @property
    def autocommit(self) -> bool:
        """Whether this connection begins nothing (SQLAlchemy's AUTOCOMMIT level): the
        harness's session itself stays in autocommit either way."""
        return not self._begins

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self._begins = not value

    def add_notice_handler(self, handler: Any) -> None:
        """Keep the session's notices as they are: the harness owns the session."""

    def _begin(self) -> None:
        """Begin a transaction before a statement, if DBAPI's manners need one now."""
        if not self._begins or self._own is not None:
            return
        status = self._conn.info.transaction_status
        if status == TransactionStatus.IDLE:
            self._conn.execute(_begin(self.isolation_level, self.read_only))
            self._own = "begin"
        elif status == TransactionStatus.INTRANS:  # the harness holds one open
            self._conn.execute(f"savepoint {SAVEPOINT}")
            self._own = "savepoint"


def _begin(level: psycopg.IsolationLevel | None, read_only: bool | None) -> str:
    parts = ["begin"]
    if level is not None:
        parts.append(f"isolation level {level.name.replace('_', ' ').lower()}")
    if read_only is not None:
        parts.append("read only" if read_only else "read write")
    return " ".join(parts)


class _BorrowedCursor(_CursorFace):
    """A cursor of the lent session that begins its connection's transaction first."""

    def __init__(self, owner: _Borrowed, cursor: Cursor[Any]) -> None:
        super().__init__(cursor, owner._last)
        self._owner = owner

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None
    ) -> _BorrowedCursor:
        self._owner._begin()
        self._execute(query, params, prepare=prepare, binary=binary)
        return self

    def executemany(
        self, query: Any, params_seq: Iterable[Any], *, returning: bool = False
    ) -> None:
        self._owner._begin()
        self._executemany(query, params_seq, returning=returning)

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchmany(self, size: int = 0) -> list[Any]:
        return self._cursor.fetchmany(size)

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    @property
    def closed(self) -> bool:
        return self._cursor.closed

    def close(self) -> None:
        self._cursor.close()
