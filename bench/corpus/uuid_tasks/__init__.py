"""Tasks with UUID ids, leased by a plpgsql function under a fresh UUID lease id.

The claim is a dataclass that carries the lease id as its fencing token (random, so
not ordered), and every later write names it; a write after the task moved on
matches no row. Answers come from the row count of the one UPDATE that decides.
The subclasses each plant one bug by pointing one call at another named query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from leasecheck.stateful.contract import Effect
from leasecheck.stateful.sqlfile import load

SQL = {name: query.text for name, query in load(Path(__file__).with_name("queries.sql")).items()}


@dataclass(frozen=True)
class TaskLease:
    """One lease of one task: `token` is the lease id the task was granted under."""

    job_id: str
    token: str
    worker: str


class UuidTasks:
    """The clean queue: extend, complete and release match the lease id."""

    name = "uuid-tasks"
    max_attempts: int | None = 3
    capped = True
    complete_sql = "complete"
    release_sql = "release"

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(SQL["install"])

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(SQL["reset"])

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        params = {
            "kind": str(payload.get("kind", "task")),
            "body": Jsonb(payload),
            "max_tries": self.max_attempts,
        }
        row = conn.execute(SQL["enqueue"], params).fetchone()
        assert row is not None, "insert ... returning gives its row"
        return str(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> TaskLease | None:
        params = {"worker": worker, "lease": lease, "capped": self.capped}
        row = conn.execute(SQL["lease"], params).fetchone()
        return None if row is None else TaskLease(job_id=row[0], token=row[1], worker=worker)

    def _write(self, conn: Connection[Any], query: str, claim: TaskLease, **more: Any) -> bool:
        params = {"id": claim.job_id, "lease_id": claim.token, "worker": claim.worker, **more}
        return conn.execute(SQL[query], params).rowcount == 1

    def heartbeat(self, conn: Connection[Any], claim: TaskLease, lease: timedelta) -> bool:
        return self._write(conn, "extend", claim, lease=lease)

    def complete(self, conn: Connection[Any], claim: TaskLease, effect: Effect) -> bool:
        with conn.transaction():
            if not self._write(conn, self.complete_sql, claim):
                return False
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: TaskLease, error: str) -> bool:
        return self._write(conn, self.release_sql, claim, error=error)

    def effect_key(self, claim: TaskLease) -> str:
        return f"task:{claim.job_id}"

    def state(self, conn: Connection[Any], job_id: str) -> str:
        row = conn.execute(SQL["state"], {"id": job_id}).fetchone()
        assert row is not None, f"task {job_id} was enqueued"
        return str(row[0])


class UnfencedComplete(UuidTasks):
    """Bug: the completion matches the task id and `state = 'leased'`, not the lease id."""

    name = "uuid-tasks-unfenced-complete"
    complete_sql = "complete_unfenced"


class CompleteByWorker(UuidTasks):
    """Bug: the completion is fenced on `leased_by`, the worker's name."""

    name = "uuid-tasks-complete-by-worker"
    complete_sql = "complete_by_worker"


class UncappedExpiry(UuidTasks):
    """Bug: an expired lease is granted again whatever the task's tries (the lease
    function's cap branch switched off, as when it was written for `release` only)."""

    name = "uuid-tasks-uncapped-expiry"
    capped = False
