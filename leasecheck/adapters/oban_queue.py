"""oban (the Python package) 0.6.3 / 0.6.7 / 0.7.0 through the contract: its own `Query`.

How oban maps onto the contract (read from oban's `_query.py`, `_producer.py`,
`_executor.py`, `_lifeline.py`, `_refresher.py`, `_stager.py` and `queries/*.sql`):

- Claim: `Query.fetch_jobs` runs `fetch_jobs.sql`, a `FOR UPDATE SKIP LOCKED` pick of
  `available` jobs of one queue that sets them `executing`, bumps `attempt` and stamps
  `attempted_at = now()` and `attempted_by = [node, producer uuid]`. From 0.6.7 it also
  skips jobs with `attempt >= max_attempts`.
- Fencing token: the row's `attempt` counter (grows by one on every fetch, so tokens are
  ordered) together with `attempted_at`, the value the worker's in-memory `Job` carries.
  What the completion compares differs by version (`ack_job.sql`):
  0.6.3 acks by `id` alone (any state: a stale ack can re-complete or re-fail a job);
  0.6.7 adds `state = 'executing'`; 0.7.0 adds `attempted_at = <the worker's attempted_at>`,
  which fences a rescued-and-refetched job's old execution. No version compares `attempt`.
- Heartbeats: none per job. The `Refresher` bumps `oban_producers.updated_at` per
  producer (queue and node), and nothing in the Lifeline's rescue reads it: a live but
  slow worker loses its job all the same. So `heartbeats = False`.
- When a lease runs out: the leader's `Lifeline` runs `rescue_jobs.sql` every 60 s:
  `executing` jobs with `attempted_at < now() - rescue_after` go back to `available`
  (or `discarded` once `attempt >= max_attempts`). `rescue_after` is the harness's lease.
  `claim()` runs that rescue, then the `Stager` (`stage_jobs.sql`: due `retryable`/
  `scheduled` jobs to `available`), then the fetch, as the loops would (oftener).
- Retry cap: `max_attempts` counts fetches. The executor acks a failure as `retryable`
  while `attempt < max_attempts`, else `discarded`; rescue discards at the cap too.
  `fail()` runs oban's own `Executor` on a worker that raises, and acks its decision.
  The worker's `backoff` hook returns 0 (oban's default is 15 s + 2^attempt plus random
  jitter, which would make replays depend on randomness): a retry is due at once.
- Completion: `complete()` acks `completed` through `Query.ack_jobs`; the ack's returned
  ids say whether it matched, and the effect runs in the same transaction. (oban's
  producer acks after the job ran, in a transaction of its own: here it gets the more
  favourable reading.)
- Held transactions: none. Every `Query` method takes a pool connection of its own and
  commits at once (only inserts may join a caller's transaction), so
  `held_transactions = False`.
- Time: every query says `timezone('UTC', now())`, which the harness shadows; no
  `advance_clock` is needed.

What the machine finds (`--leasecheck-profile ci`, each violated property excused in
turn): 0.6.3 breaks single-completion (a rescued execution's late ack completes the job
a second time), fencing, exclusive-lease and no-lost-jobs; 0.6.7 keeps single-completion
but breaks fencing (a late ack or failure of the rescued execution is taken while the
new owner runs), exclusive-lease (that late failure makes the job fetchable again under
its owner) and owner-progress; 0.7.0 breaks only owner-progress: a rescue ends the
execution even when nobody fetched the job again, and the late ack is then refused
(the job runs again: at-least-once, by design).

oban's `Query` only accepts an `AsyncConnectionPool`; the adapter builds it around a
pool that lends the harness's sync connection as an async one (`PinnedPool`), so the
statements, arguments and transactions are oban's own, on the harness's connection.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Sequence
from datetime import datetime, timedelta
from importlib.metadata import version
from typing import Any, TypeVar, cast

from oban._executor import AckAction, Executor
from oban._query import Query
from oban.job import Job
from psycopg import Connection

from leasecheck.adapters._pinned import PinnedPool
from leasecheck.stateful.contract import Claim, Effect

QUEUE = "leasecheck"
WORKER = f"{__name__}.LeasecheckWorker"
PRODUCERS = uuid.UUID("0b7e4a5c-3d2f-4f59-8a61-2c9e1f0d7b35")
VERSION = version("oban")
T = TypeVar("T")


class _Raised(Exception):
    """The job's failure, as the harness reports it."""


class LeasecheckWorker:
    """The oban worker the adapter's jobs name: it fails when told to, retries at once."""

    async def process(self, job: Job) -> None:
        error = job.extra.get("error")
        if error is not None:
            raise _Raised(str(error))

    def backoff(self, job: Job) -> int:
        return 0


def _query(conn: Connection[Any]) -> Query:
    """Return oban's `Query` on the harness's connection (its pool type check bypassed)."""
    query = Query.__new__(Query)
    query._pool = cast(Any, PinnedPool(conn))
    query._prefix = "public"
    return query


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _held_job(claim: Claim, max_attempts: int, error: str | None = None) -> Job:
    """The worker's in-memory job, as far as oban's executor and ack read it."""
    attempt, attempted_at = cast(tuple[int, str], claim.token)
    return Job(
        WORKER,
        id=int(claim.job_id),
        queue=QUEUE,
        attempt=attempt,
        max_attempts=max_attempts,
        attempted_at=datetime.fromisoformat(attempted_at),
        extra={} if error is None else {"error": error},
    )


class ObanQueue:
    """oban's producer, lifeline and stager protocol, one contract call at a time."""

    name = f"oban-{VERSION}"
    ordered_tokens = True
    heartbeats = False
    held_transactions = False

    def __init__(self, max_attempts: int = 3) -> None:
        self.max_attempts: int | None = max_attempts
        self._cap = max_attempts

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            _run(_query(conn).install())

    def reset(self, conn: Connection[Any]) -> None:
        _run(_query(conn).reset())

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        job = Job(WORKER, queue=QUEUE, args=payload, max_attempts=self._cap)
        inserted = _run(_query(conn).insert_jobs([job]))
        assert inserted[0].id is not None
        return int(inserted[0].id)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        query = _query(conn)
        producer = str(uuid.uuid5(PRODUCERS, worker))

        async def rescue_stage_fetch() -> Sequence[Job]:
            await query.rescue_jobs(lease.total_seconds())
            await query.stage_jobs(limit=1000, queues=[QUEUE])
            fetched: list[Job] = await query.fetch_jobs(
                demand=1, queue=QUEUE, node=worker, uuid=producer
            )
            return fetched

        jobs = _run(rescue_stage_fetch())
        if not jobs:
            return None
        job = jobs[0]
        assert job.id is not None and job.attempted_at is not None
        return Claim(
            job_id=job.id, token=(job.attempt, job.attempted_at.isoformat()), worker=worker
        )

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        return False  # oban extends no job's lease (heartbeats = False; never called)

    def _ack(self, conn: Connection[Any], job: Job) -> bool:
        """Run oban's executor on `job` and ack its decision; return whether the ack matched."""

        async def execute_and_ack() -> list[int]:
            executor = await Executor(job, safe=True).execute()
            action: AckAction | None = executor.action
            assert action is not None
            acked: list[int] = await _query(conn).ack_jobs([action])
            return acked

        return job.id in _run(execute_and_ack())

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            if not self._ack(conn, _held_job(claim, self._cap)):
                return False
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        return self._ack(conn, _held_job(claim, self._cap, error))

    def effect_key(self, claim: Claim) -> str:
        return f"oban-job-{claim.job_id}"


Queue = ObanQueue
