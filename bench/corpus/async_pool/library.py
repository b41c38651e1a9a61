"""A small asyncio task queue on psycopg_pool, as an application ships one.

Every method borrows a connection from the pool it was given and runs one
statement (the completion two, in one transaction). It knows nothing of
leasecheck: the adapter in this package drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from leasecheck.stateful.sqlfile import load

SQL = {name: query.text for name, query in load(Path(__file__).with_name("queries.sql")).items()}

Body = Callable[[AsyncConnection[Any]], None]
"""The task's body, run inside the transaction that marks it done."""


class TaskQueue:
    """Push, pop, touch, finish, retry and reap tasks; the attempt fences every write."""

    touch_sql = "touch"
    retry_sql = "retry"
    reap_sql = "reap"

    def __init__(self, pool: AsyncConnectionPool[Any], max_attempts: int = 3) -> None:
        self.pool = pool
        self.max_attempts = max_attempts

    async def push(self, payload: dict[str, Any]) -> int:
        async with self.pool.connection() as conn:
            params = {"payload": Jsonb(payload), "max_attempts": self.max_attempts}
            cur = await conn.execute(SQL["push"], params)
            row = await cur.fetchone()
            assert row is not None, "insert ... returning gives its row"
            return int(row[0])

    async def pop(self, worker: str, lease: timedelta) -> tuple[int, int] | None:
        async with self.pool.connection() as conn:
            cur = await conn.execute(SQL["pop"], {"worker": worker, "lease": lease})
            row = await cur.fetchone()
            return None if row is None else (int(row[0]), int(row[1]))

    async def touch(self, task_id: int, attempt: int, lease: timedelta) -> bool:
        async with self.pool.connection() as conn:
            params = {"id": task_id, "attempt": attempt, "lease": lease}
            cur = await conn.execute(SQL[self.touch_sql], params)
            return bool(cur.rowcount == 1)

    async def finish(self, task_id: int, attempt: int, body: Body) -> bool:
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(SQL["finish"], {"id": task_id, "attempt": attempt})
            if await cur.fetchone() is None:
                return False
            body(conn)
            return True

    async def retry(self, task_id: int, attempt: int, error: str) -> bool:
        async with self.pool.connection() as conn:
            params = {"id": task_id, "attempt": attempt, "error": error}
            cur = await conn.execute(SQL[self.retry_sql], params)
            return bool(cur.rowcount == 1)

    async def reap(self) -> int:
        async with self.pool.connection() as conn:
            cur = await conn.execute(SQL[self.reap_sql])
            return int(cur.rowcount)

    async def state(self, task_id: int) -> str:
        async with self.pool.connection() as conn:
            cur = await conn.execute(SQL["state"], {"id": task_id})
            row = await cur.fetchone()
            assert row is not None, f"task {task_id} was pushed"
            return str(row[0])


class UnfencedTouch(TaskQueue):
    """Bug: the heartbeat extends the lease of whatever attempt holds the task."""

    touch_sql = "touch_unfenced"


class UnfencedRetry(TaskQueue):
    """Bug: any attempt may send the task back."""

    retry_sql = "retry_unfenced"


class UncappedReaper(TaskQueue):
    """Bug: the reaper sends every expired task back to waiting, whatever its attempt."""

    reap_sql = "reap_uncapped"
