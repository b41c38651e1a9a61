"""A `tasks` table leased in batches: checked-text states, a `tries` token, a backoff.

Written from the README as a worker that pulls several tasks at a time would be: one
query takes up to n visible tasks (`claim` is a batch of one), `complete_many`
finishes a batch in one statement, a claim is a small dataclass whose token is the
task's try, and the claim gives up tasks whose last try's lease ran out before it
takes the next. The subclasses each plant one bug the issue's short programs reach
(see `bench.corpus.short_programs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from leasecheck.stateful.contract import BatchEffect, Effect
from leasecheck.stateful.sqlfile import load

SQL = {name: query.text for name, query in load(Path(__file__).with_name("tasks.sql")).items()}


@dataclass(frozen=True)
class Ticket:
    """One try of one task: `token` is the try number the task was taken under."""

    job_id: int
    token: int
    worker: str


class TaskTable:
    """The clean queue: every write to an active task names its try, pairwise in a batch."""

    name = "task-table"
    max_attempts: int | None = 2
    ordered_tokens = True
    extend_sql = "extend"
    retry_sql = "retry"
    finish_many_sql = "finish_many"

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(SQL["install"])

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(SQL["reset"])

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        params = {"payload": Jsonb(payload), "max_tries": self.max_attempts}
        row = conn.execute(SQL["enqueue"], params).fetchone()
        assert row is not None, "insert ... returning gives its row"
        return int(row[0])

    def claim_many(
        self, conn: Connection[Any], worker: str, lease: timedelta, n: int
    ) -> list[Ticket]:
        with conn.transaction():
            conn.execute(SQL["give_up_expired"])
            params = {"worker": worker, "lease": lease, "n": n}
            rows = conn.execute(SQL["take"], params).fetchall()
        return [Ticket(job_id=int(i), token=int(t), worker=worker) for i, t in sorted(rows)]

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Ticket | None:
        taken = self.claim_many(conn, worker, lease, 1)
        return taken[0] if taken else None

    def heartbeat(self, conn: Connection[Any], claim: Ticket, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "tries": claim.token, "lease": lease}
        return conn.execute(SQL[self.extend_sql], params).fetchone() is not None

    def complete(self, conn: Connection[Any], claim: Ticket, effect: Effect) -> bool:
        with conn.transaction():
            if not self._finish(conn, claim):
                return False
            effect(conn)
            return True

    def _finish(self, conn: Connection[Any], claim: Ticket) -> bool:
        params = {"id": claim.job_id, "tries": claim.token}
        return conn.execute(SQL["finish"], params).fetchone() is not None

    def complete_many(
        self, conn: Connection[Any], claims: list[Ticket], effect: BatchEffect
    ) -> list[bool]:
        """Finish the batch in one statement; a claim is accepted when its own (id, try)
        came back, and its effect runs in the same transaction."""
        params = {"ids": [c.job_id for c in claims], "tries": [c.token for c in claims]}
        with conn.transaction():
            rows = conn.execute(SQL[self.finish_many_sql], params).fetchall()
            finished = {(int(i), int(t)) for i, t in rows}
            answers = [(c.job_id, c.token) in finished for c in claims]
            for claim, accepted in zip(claims, answers, strict=True):
                if accepted:
                    effect(conn, claim)
        return answers

    def fail(self, conn: Connection[Any], claim: Ticket, error: str) -> bool:
        params = {"id": claim.job_id, "tries": claim.token, "error": error}
        return conn.execute(SQL[self.retry_sql], params).fetchone() is not None

    def effect_key(self, claim: Ticket) -> str:
        return f"tasks/{claim.job_id}"

    def state(self, conn: Connection[Any], job_id: int) -> str:
        row = conn.execute(SQL["status"], {"id": job_id}).fetchone()
        assert row is not None, f"task {job_id} was enqueued"
        return str(row[0])


class RetryAtCap(TaskTable):
    """Bug: the failure report re-queues a task on its last try as on any other, and the
    claim takes only tasks with tries left, so the task waits, ready, for ever."""

    name = "task-table-retry-at-cap"
    expected = ("no-lost-jobs",)
    retry_sql = "retry_always"


class DoneThenEffect(TaskTable):
    """Bug: the completion commits `finished` on its own and runs the effect in a second
    transaction, so a worker that dies between the two leaves a finished task that never
    had its effect."""

    name = "task-table-done-then-effect"
    expected = ("done-effect",)

    def complete(self, conn: Connection[Any], claim: Ticket, effect: Effect) -> bool:
        if not self._finish(conn, claim):
            return False
        with conn.transaction():
            effect(conn)
        return True


class HeartbeatRevives(TaskTable):
    """Bug: the heartbeat is fenced on the try but writes `active` back without checking
    the state, so a beat that waited out its own worker's completion revives the task."""

    name = "task-table-heartbeat-revives"
    expected = ("fencing", "no-lost-jobs", "single-completion", "exclusive-lease")
    extend_sql = "extend_reviving"


class BatchAnyAny(TaskTable):
    """Bug: the batch completion matches `id = any(ids) and tries = any(tries)`, each list
    on its own, so a stale claim in a batch beside a fresh one with the stale task's
    current try finishes a task another worker holds."""

    name = "task-table-batch-any-any"
    expected = ("owner-progress", "late-owner", "fencing", "single-completion", "done-effect")
    finish_many_sql = "finish_many_any"


class ExtendFromLeaseEnd(TaskTable):
    """Bug: the heartbeat adds a lease to the old lease end rather than to now, so after a
    pause of more than a lease past its end the "extended" lease has already run out,
    and the heartbeat still answers True."""

    name = "task-table-extend-from-lease-end"
    expected = ("exclusive-lease",)
    extend_sql = "extend_from_lease_end"
