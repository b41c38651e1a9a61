"""The contract over `library.TaskQueue`, an asyncio queue on psycopg_pool.

Each call builds the library's own object on a `PinnedPool` (the harness's
connection lent as the pool's only one) and runs its coroutine with
`asyncio.run`, as docs/adapters.md describes. The body runs inside the library's
`finish` transaction (`effect` on the pinned connection's sync face). Recovery is the
library's reaper, run as `maintain`; it revokes an expired lease whether or not
anyone claims the task, so the queue declares `revokes_expired`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar, cast

from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool

from bench.corpus.async_pool import library
from leasecheck.adapters.pinned import PinnedConnection, PinnedPool
from leasecheck.stateful.contract import Effect

T = TypeVar("T")
TaskClaim = tuple[int, int, str]
"""(task id, attempt, worker)."""


class AsyncPoolQueue:
    """The clean adapter over the clean library."""

    name = "async-pool"
    max_attempts: int | None = 3
    ordered_tokens = True
    revokes_expired = True
    tasks: type[library.TaskQueue] = library.TaskQueue

    def _run(self, conn: Connection[Any], call: Callable[[library.TaskQueue], Awaitable[T]]) -> T:
        async def go() -> T:
            # The library is typed for psycopg_pool's pool; PinnedPool is the one it accepts.
            pool = cast(AsyncConnectionPool[Any], PinnedPool(conn))
            assert self.max_attempts is not None
            return await call(self.tasks(pool, max_attempts=self.max_attempts))

        return asyncio.run(go())

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(library.SQL["install"])

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(library.SQL["reset"])

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        return self._run(conn, lambda q: q.push(payload))

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> TaskClaim | None:
        got = self._run(conn, lambda q: q.pop(worker, lease))
        return None if got is None else (got[0], got[1], worker)

    def heartbeat(self, conn: Connection[Any], claim: TaskClaim, lease: timedelta) -> bool:
        return self._run(conn, lambda q: q.touch(claim[0], claim[1], lease))

    def complete(self, conn: Connection[Any], claim: TaskClaim, effect: Effect) -> bool:
        def body(pinned: AsyncConnection[Any]) -> None:
            effect(cast(PinnedConnection, pinned).sync)  # same session, same transaction

        return self._run(conn, lambda q: q.finish(claim[0], claim[1], body))

    def fail(self, conn: Connection[Any], claim: TaskClaim, error: str) -> bool:
        return self._run(conn, lambda q: q.retry(claim[0], claim[1], error))

    def maintain(self, conn: Connection[Any]) -> None:
        self._run(conn, lambda q: q.reap())

    def effect_key(self, claim: TaskClaim) -> str:
        return f"background-task-{claim[0]}"

    def state(self, conn: Connection[Any], job_id: int) -> str:
        return self._run(conn, lambda q: q.state(job_id))


class UnfencedHeartbeat(AsyncPoolQueue):
    """Bug: the library's heartbeat extends whatever attempt holds the task."""

    name = "async-pool-unfenced-heartbeat"
    tasks = library.UnfencedTouch


class UnfencedFail(AsyncPoolQueue):
    """Bug: the library's retry sends the task back for any attempt."""

    name = "async-pool-unfenced-fail"
    tasks = library.UnfencedRetry


class UncappedReaper(AsyncPoolQueue):
    """Bug: the library's reaper requeues expired tasks past their last attempt."""

    name = "async-pool-uncapped-reaper"
    tasks = library.UncappedReaper
