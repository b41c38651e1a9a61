"""Simulated time for libraries that read the client's clock (`time.time()`) instead of `now()`.

The harness's time is simulated in the database: on its connections `now()` answers a
clock kept in a table, which stands still between the machine's advances
(`leasecheck.stateful.clock`). A library that takes its timestamps in Python (saq's
`time.time()`, say) would compare them with the real clock and never see a lease run
out. `client_clock` makes the library's clock answer the call's simulated now:

```python
import saq.utils
from leasecheck.adapters.client_clock import client_clock

def claim(self, conn, worker, lease):
    with client_clock(conn, (saq.utils, "time")):    # saq.utils calls time.time()
        return asyncio.run(queue.dequeue())           # saq's clock reads now() of conn
```

- `client_clock(conn, *targets)` reads `now()` once on `conn` (what that connection's
  SQL sees as now: simulated on the harness's connections) and, until the block ends,
  makes each target answer that instant. It yields the instant as an aware datetime.
- A target is `(owner, name)`: the attribute `name` of a module or object, which must
  be the `time` module itself (its `time()` and `time_ns()` answer the simulated
  instant, everything else is the real module's), or the function `time.time` or
  `time.time_ns` (a library that did `from time import time`). Anything else is a
  `TypeError` that says what is accepted.
- The first use replaces the attribute for good with a stand-in that answers the real
  clock outside a block (`install`; `uninstall` puts the original back). Inside, the
  instant is held in a context variable, so it holds on this thread, in the coroutines
  `asyncio.run` starts from it, and nowhere else: two workers' calls on two threads
  each see their own call's instant. Blocks nest; the inner instant wins.
- `simulated_now(conn)` is the read alone; `current()` the instant of the block
  running now (None outside any).

Every timestamp a library takes inside one block is the same instant, read once, as every
`now()` of one transaction is; a call the machine pauses between two transactions of its
own may see the clock move in SQL while the block's instant stays.
"""

from __future__ import annotations

import threading
import time as _time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import Connection

__all__ = ["client_clock", "current", "install", "simulated_now", "uninstall"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NOW: ContextVar[datetime | None] = ContextVar("leasecheck_client_clock", default=None)
_GUARD = threading.Lock()
_ORIGINALS: dict[tuple[int, str], Any] = {}


def simulated_now(conn: Connection[Any]) -> datetime:
    """Return `now()` as `conn`'s SQL sees it (the harness's simulated time on its connections)."""
    row = conn.execute("select now()").fetchone()
    if row is None or not isinstance(row[0], datetime):
        raise RuntimeError(f"select now() answered {row!r}")
    return row[0]


def current() -> datetime | None:
    """Return the instant of the `client_clock` block running now, or None outside any."""
    return _NOW.get()


def _seconds() -> float:
    at = _NOW.get()
    return _time.time() if at is None else at.timestamp()


def _nanoseconds() -> int:
    at = _NOW.get()
    if at is None:
        return _time.time_ns()
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


class _SimulatedTime(types.ModuleType):
    """The `time` module, but `time()` and `time_ns()` answer the block's instant."""

    def __init__(self) -> None:
        super().__init__("time", _time.__doc__)

    def __getattr__(self, name: str) -> Any:
        return getattr(_time, name)

    @staticmethod
    def time() -> float:
        return _seconds()

    @staticmethod
    def time_ns() -> int:
        return _nanoseconds()


def _stand_in(found: Any) -> Any:
    """Return what replaces `found`, or raise TypeError if it is not a clock we know."""
    if found is _time:
        return _SimulatedTime()
    if found is _time.time:
        return _seconds
    if found is _time.time_ns:
        return _nanoseconds
    raise TypeError(
        f"client_clock replaces the time module, time.time or time.time_ns; found {found!r}"
    )


def _ours(found: Any) -> bool:
    return isinstance(found, _SimulatedTime) or found in (_seconds, _nanoseconds)


def install(owner: Any, name: str = "time") -> None:
    """Replace `owner.<name>` (the time module, time.time or time.time_ns) for good.

    Outside a `client_clock` block the stand-in answers the real clock. Idempotent.
    """
    with _GUARD:
        found = getattr(owner, name)
        if _ours(found):
            return
        replacement = _stand_in(found)
        _ORIGINALS[(id(owner), name)] = found
        setattr(owner, name, replacement)


def uninstall(owner: Any, name: str = "time") -> None:
    """Put back what `install` replaced (nothing happens if it replaced nothing there)."""
    with _GUARD:
        original = _ORIGINALS.pop((id(owner), name), None)
        if original is not None:
            setattr(owner, name, original)


@contextmanager
def client_clock(conn: Connection[Any], *targets: tuple[Any, str]) -> Iterator[datetime]:
    """Within the block, each target answers `conn`'s `now()`, read once; yield that instant."""
    for owner, name in targets:
        install(owner, name)
    at = simulated_now(conn)
    token = _NOW.set(at)
    try:
        yield at
    finally:
        _NOW.reset(token)
