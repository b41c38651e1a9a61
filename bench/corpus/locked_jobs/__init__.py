"""A `jobs` table with `locked_by`/`locked_until`, a status enum and an `attempts` counter.

Written from the README the way a Rails-style queue is: claims are plain
`(id, attempts, worker)` tuples, the attempt counter is the fencing token, a failed
job backs off through `run_at`, and the claim buries jobs whose last attempt's lock
ran out before it locks the next one. The subclasses below each plant one bug by
pointing one call at another named query.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from leasecheck.stateful.contract import Effect
from leasecheck.stateful.sqlfile import load

SQL = {name: query.text for name, query in load(Path(__file__).with_name("queries.sql")).items()}

JobClaim = tuple[int, int, str]
"""(job id, attempts when locked, worker)."""


class LockedJobs:
    """The clean queue: every write to a locked job is fenced on its attempt."""

    name = "locked-jobs"
    max_attempts: int | None = 4
    ordered_tokens = True
    heartbeat_sql = "heartbeat"
    succeed_sql = "succeed"
    retry_sql = "retry"
    lock_sql = "lock_next"
    buries_exhausted = True

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(SQL["install"])

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(SQL["reset"])

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        params = {"args": Jsonb(payload), "max_attempts": self.max_attempts}
        row = conn.execute(SQL["enqueue"], params).fetchone()
        assert row is not None, "insert ... returning gives its row"
        return int(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> JobClaim | None:
        with conn.transaction():
            if self.buries_exhausted:
                conn.execute(SQL["bury_exhausted"])
            row = conn.execute(SQL[self.lock_sql], {"worker": worker, "lease": lease}).fetchone()
        return None if row is None else (int(row[0]), int(row[1]), worker)

    def heartbeat(self, conn: Connection[Any], claim: JobClaim, lease: timedelta) -> bool:
        job_id, attempts, worker = claim
        params = {"id": job_id, "attempts": attempts, "worker": worker, "lease": lease}
        return conn.execute(SQL[self.heartbeat_sql], params).fetchone() is not None

    def complete(self, conn: Connection[Any], claim: JobClaim, effect: Effect) -> bool:
        job_id, attempts, _ = claim
        with conn.transaction():
            params = {"id": job_id, "attempts": attempts}
            if conn.execute(SQL[self.succeed_sql], params).fetchone() is None:
                return False
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: JobClaim, error: str) -> bool:
        job_id, attempts, _ = claim
        params = {"id": job_id, "attempts": attempts, "error": error}
        return conn.execute(SQL[self.retry_sql], params).fetchone() is not None

    def effect_key(self, claim: JobClaim) -> str:
        return f"jobs/{claim[0]}"

    def state(self, conn: Connection[Any], job_id: int) -> str:
        row = conn.execute(SQL["status"], {"id": job_id}).fetchone()
        assert row is not None, f"job {job_id} was enqueued"
        return str(row[0])


class UnfencedHeartbeat(LockedJobs):
    """Bug: the heartbeat pushes the lock of any attempt of the job."""

    name = "locked-jobs-unfenced-heartbeat"
    heartbeat_sql = "heartbeat_unfenced"


class HeartbeatByWorker(LockedJobs):
    """Bug: the heartbeat is fenced on `locked_by`, the worker's name, not on the attempt."""

    name = "locked-jobs-heartbeat-by-worker"
    heartbeat_sql = "heartbeat_by_worker"


class UnfencedComplete(LockedJobs):
    """Bug: any attempt may mark a locked job succeeded."""

    name = "locked-jobs-unfenced-complete"
    succeed_sql = "succeed_unfenced"


class UnfencedFail(LockedJobs):
    """Bug: any attempt may hand a locked job back for a retry."""

    name = "locked-jobs-unfenced-fail"
    retry_sql = "retry_unfenced"


class UncappedExpiry(LockedJobs):
    """Bug: the retry cap lives only in `fail`; a job whose lock runs out is picked up
    again however many attempts it had (no burying, no cap in the claim)."""

    name = "locked-jobs-uncapped-expiry"
    lock_sql = "lock_next_uncapped"
    buries_exhausted = False
