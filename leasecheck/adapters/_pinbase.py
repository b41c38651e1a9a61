"""What `leasecheck.adapters.pinned` and `leasecheck.adapters.pinned_sync` share.

The async pin (`PinnedPool`) and the sync one (`PinnedSyncPool`) lend the same thing,
the harness's one sync connection, and differ only in how a library borrows and calls
it (awaiting or not). What does not await lives here, once:

- `PoolClosed` and `NestedBorrow`, the two pins' errors (one class each, so whichever
  module an adapter imports them from, it catches both pins' refusals);
- `_Last`, the spy that keeps the status line and row count of the latest statement
  run through one pool;
- `_CursorFace`, `_ConnectionFace` and `_PoolFace`: the wrapped cursor's results, the
  lent connection's read-only properties and `notifies`, and the pool's psycopg_pool
  attributes, properties, stats, closed flag and nested-borrow rule. Each public class
  adds its own borrowing, statements and context managers, async or sync.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar

import psycopg
from psycopg import Connection, Cursor

try:
    from psycopg_pool import PoolClosed as _LibrarysPoolClosed
except ImportError:  # pragma: no cover - without psycopg_pool no library catches its class
    _LibrarysPoolClosed = psycopg.OperationalError  # type: ignore[misc,assignment]

__all__ = ["NestedBorrow", "PoolClosed"]


class PoolClosed(_LibrarysPoolClosed):
    """The pool was closed (`close()`) and lends no connection: psycopg_pool's own
    `PoolClosed` (when psycopg_pool is installed, else `psycopg.OperationalError`), so
    a library catching its pool's error catches a pin's refusal."""


class NestedBorrow(psycopg.OperationalError):
    """A connection was borrowed while the pool's one was lent (`nested="refuse"`)."""


class _Last:
    """The status line and row count of the latest statement run through one pool."""

    def __init__(self) -> None:
        self.status: str | None = None
        self.rowcount = -1

    def saw(self, cursor: Cursor[Any]) -> None:
        self.status = cursor.statusmessage
        self.rowcount = cursor.rowcount


class _CursorFace:
    """One sync cursor of the harness's connection, telling its pool's spy each
    statement's result: what the async and the sync cursor share."""

    def __init__(self, cursor: Cursor[Any], last: _Last | None = None) -> None:
        self._cursor = cursor
        self._last = last or _Last()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def statusmessage(self) -> str | None:
        return self._cursor.statusmessage

    @property
    def description(self) -> Any:
        return self._cursor.description

    def nextset(self) -> bool | None:
        return self._cursor.nextset()

    def _execute(self, query: Any, params: Any, *, prepare: bool | None, binary: Any) -> None:
        self._cursor.execute(query, params, prepare=prepare, binary=binary)
        self._last.saw(self._cursor)

    def _executemany(self, query: Any, params_seq: Iterable[Any], *, returning: bool) -> None:
        self._cursor.executemany(query, params_seq, returning=returning)
        self._last.saw(self._cursor)


class _ConnectionFace:
    """The harness's sync connection, lent: what the async and the sync face share."""

    def __init__(self, conn: Connection[Any], last: _Last | None = None) -> None:
        self._conn = conn
        self._last = last or _Last()

    @property
    def sync(self) -> Connection[Any]:
        """The harness's connection itself."""
        return self._conn

    @property
    def autocommit(self) -> bool:
        return self._conn.autocommit

    def _keep_autocommit(self, value: bool) -> None:
        """The harness owns the connection's mode: only its current value is accepted."""
        if value != self._conn.autocommit:
            raise psycopg.ProgrammingError(
                f"the harness's connection has autocommit={self._conn.autocommit}; "
                "a pinned connection cannot change it"
            )

    @property
    def info(self) -> Any:
        return self._conn.info

    @property
    def adapters(self) -> Any:
        return self._conn.adapters

    @property
    def closed(self) -> bool:
        return self._conn.closed

    @property
    def broken(self) -> bool:
        return self._conn.broken

    def notifies(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            "a pinned connection cannot LISTEN: notifications need a connection of their "
            "own, and the harness gives each worker only the one it watches"
        )


_C = TypeVar("_C", bound=_ConnectionFace)


class _PoolFace(Generic[_C]):
    """psycopg_pool's pool surface that does not await, on one lent connection `conn`:
    what `PinnedPool` and `PinnedSyncPool` share. Each sets `conn` and `kwargs`, and
    borrows (async or sync) through `_lend()` and `_take_back()`."""

    conn: _C
    kwargs: dict[str, Any]
    _home: ClassVar[str]
    """The module whose docstring a `NestedBorrow` points to."""

    def __init__(self, *, name: str, nested: str) -> None:
        if nested not in ("share", "refuse"):
            raise ValueError(f"nested={nested!r}: give 'share' or 'refuse'")
        self.nested = nested
        """What a borrow nested inside another gets: the same session, or `NestedBorrow`."""
        self.name = name
        self.min_size = self.max_size = 1
        self.timeout = 30.0
        self._last = _Last()
        self._closed = False
        self._out = 0
        self._lent = 0

    @property
    def conninfo(self) -> str:
        return self.conn.sync.info.dsn

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def last_status(self) -> str | None:
        """The status line of the latest statement run through the pool ("UPDATE 1")."""
        return self._last.status

    @property
    def last_rowcount(self) -> int:
        """The row count of the latest statement run through the pool (-1 before any)."""
        return self._last.rowcount

    def get_stats(self) -> dict[str, int]:
        return {
            "pool_min": 1,
            "pool_max": 1,
            "pool_size": 1,
            "pool_available": 0 if self._out else 1,
            "requests_num": self._lent,
        }

    def pop_stats(self) -> dict[str, int]:
        stats = self.get_stats()
        self._lent = 0
        return stats

    def _refuse_if_closed(self) -> None:
        if self._closed:
            raise PoolClosed(f"the pool {self.name!r} is already closed")

    def _lend(self) -> _C:
        """The one connection, counted as lent; refused if the pool is closed, or if it
        is out already and nested borrows are refused."""
        self._refuse_if_closed()
        if self._out and self.nested == "refuse":
            raise NestedBorrow(
                f"the pool {self.name!r} lends one session, and it is lent: a real pool "
                f"would lend a second connection here (see {self._home})"
            )
        self._lent += 1
        self._out += 1
        return self.conn

    def _take_back(self) -> None:
        """Taken back as it is: no commit, no rollback."""
        self._out = max(0, self._out - 1)
