"""oban (the Python package) 0.6.3 / 0.6.7 / 0.7.0 through the contract: its own `Query`.

How oban maps onto the contract (read from oban's `_query.py`, `_producer.py`,
`_executor.py`, `_lifeline.py`, `_refresher.py`, `_stager.py` and `queries/*.sql`;
line numbers are those of the installed release):

- Claim: `Query.fetch_jobs` runs `fetch_jobs.sql`, a `FOR UPDATE SKIP LOCKED` pick of
  `available` jobs of one queue that sets them `executing`, bumps `attempt` and stamps
  `attempted_at = now()` and `attempted_by = [node, producer uuid]`. From 0.6.7 it also
  skips jobs with `attempt >= max_attempts` (fetch_jobs.sql:26). `claim()` runs the
  `Stager` (`stage_jobs.sql`: due `retryable`/`scheduled` jobs to `available`) and then
  the fetch: the stager's loop runs every second (`_stager.py`, `interval=1.0`), far
  inside the 30 s lease, so staging just before each fetch stands in for it.
- Fencing token: the row's `attempt` counter (grows by one on every fetch, so tokens are
  ordered) together with `attempted_at`, the value the worker's in-memory `Job` carries.
  What the ack compares differs by version (`ack_job.sql`):
  0.6.3 acks by `id` alone (any state: a stale ack can re-complete or re-fail a job);
  0.6.7 adds `state = 'executing'` (ack_job.sql:11); 0.7.0 adds
  `attempted_at = <the worker's attempted_at>` (ack_job.sql:12), which fences a
  rescued-and-refetched job's old execution. No version compares `attempt`.
- Heartbeats: none per job. The `Refresher` bumps `oban_producers.updated_at` per
  producer (queue and node), and nothing in the Lifeline's rescue reads it: a live but
  slow worker loses its job all the same. So `heartbeats = False`.
- When a lease runs out: the leader's `Lifeline` runs `rescue_jobs.sql` every 60 s:
  `executing` jobs with `attempted_at < now() - rescue_after` go back to `available`
  (or `discarded` once `attempt >= max_attempts`); from 0.6.7 it also discards
  `available` jobs already at the cap (rescue_jobs.sql:21). That sweep is `maintain()`,
  which the machine runs as its own actor, with `rescue_after` the harness's 30 s lease.
- Revocation (`revokes_expired`), 0.6.7 and 0.7.0 only: the rescue is by age alone
  (rescue_jobs.sql:16-19 reads no liveness: nothing there joins `oban_producers`), so it
  deliberately ends an execution that ran too long, whether its worker is alive or not,
  and the ack then matches only an `executing` row (0.6.7, ack_job.sql:11) of the same
  execution (0.7.0, ack_job.sql:11-12): a rescued execution's late ack matches nothing,
  the job runs again. The README says as much: precise rescue is not the open-source
  Lifeline's aim ("Switch to Pro for [...] accurate orphan rescue", README, Features),
  and Oban for Elixir, whose Lifeline this ports, documents `rescue_after` as "the
  maximum amount of time [...] that a job may execute before being rescued" and that
  it "may transition jobs that are genuinely executing". 0.6.3 acks by id in any state
  (ack_job.sql:10) and takes the late ack, so nothing there is revoked and nothing is
  declared.
- Retry cap: `max_attempts` counts fetches. The executor acks a failure as `retryable`
  while its own `job.attempt < max_attempts`, else `discarded` (`_executor.py`); rescue
  discards at the cap too. `fail()` runs oban's own `Executor` on a worker that raises,
  and acks its decision. The worker's `backoff` hook returns 0 (oban's default is 15 s
  + 2^attempt plus random jitter, which would make replays depend on randomness): a
  retry is due at once. In 0.6.3 a stale failure acked after the job was fetched again
  at the cap leaves it `retryable` at `attempt = max_attempts`; staged, its next fetch
  breaks the `attempt_range` check (`attempt <= max_attempts`, install.sql:62), and the
  fetch, one statement for the whole batch, raises `CheckViolation` for every later
  claim of the queue (the producer logs it and tries again, `_producer.py:262-263`).
  The adapter lets that error through untouched: it is the library's answer.
- Completion: `complete()` acks `completed` through `Query.ack_jobs`; the ack's returned
  ids say whether it matched. oban's producer runs the worker's `process` and only then
  acks, in a transaction of its own with no user code in it, so `transactional_effects
  = False` and `complete()` never calls the effect: the machine runs it as the task
  body, before `complete`.
- State: `state()` reads `oban_jobs.state`: `available`, `scheduled`, `retryable` (and
  `suspended`, held until resumed) are queued, `executing` running, `completed` done;
  `discarded` and `cancelled` are ended for good without a success, so failed.
- Held transactions: none. Every `Query` method takes a pool connection of its own and
  commits at once (only inserts may join a caller's transaction), so
  `held_transactions = False`.
- Time: every query says `timezone('UTC', now())`, which the harness shadows; no
  `advance_clock` is needed.

What the machine finds (`ci` profile, each violated property excused in turn,
2026-12-01): 0.7.0 keeps every property it is judged on (late-owner is its declared
design); 0.6.7 breaks fencing (a rescued execution's late failure is acked while the
job's next execution runs); 0.6.3 breaks fencing, single-completion (two completions
accepted), exclusive-lease and no-lost-jobs. Each has a witness under
`matrix/witnesses/`, as have 0.6.7's exclusive-lease and owner-progress, which that
budget did not reach, and 0.6.3's poisoned queue.

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
from pathlib import Path
from typing import Any, TypeVar, cast

from oban._executor import AckAction, Executor
from oban._query import Query
from oban.job import Job
from psycopg import Connection

from leasecheck.adapters.pinned import PinnedPool
from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Claim, Effect, JobId
from leasecheck.stateful.sqlfile import load

QUEUE = "leasecheck"
WORKER = f"{__name__}.LeasecheckWorker"
PRODUCERS = uuid.UUID("0b7e4a5c-3d2f-4f59-8a61-2c9e1f0d7b35")
VERSION = version("oban")
RELEASE = tuple(int(p) for p in VERSION.split(".")[:3])
QUERIES = load(Path(__file__).with_name("oban.sql"))
STATES = {
    "available": QUEUED,
    "scheduled": QUEUED,
    "retryable": QUEUED,
    "suspended": QUEUED,
    "executing": RUNNING,
    "completed": DONE,
    "discarded": FAILED,
    "cancelled": FAILED,
}
"""oban's job states (`oban_job_state`, install.sql) as the contract's states."""
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
    transactional_effects = False
    revokes_expired = RELEASE >= (0, 6, 7)

    def __init__(self, max_attempts: int = 3, rescue_after: float = 30.0) -> None:
        self.max_attempts: int | None = max_attempts
        self._cap = max_attempts
        self._rescue_after = rescue_after

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

    def maintain(self, conn: Connection[Any]) -> None:
        """The leader's Lifeline: one `rescue_jobs` sweep with `rescue_after` = the lease."""
        _run(_query(conn).rescue_jobs(self._rescue_after))

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        query = _query(conn)
        producer = str(uuid.uuid5(PRODUCERS, worker))

        async def stage_fetch() -> Sequence[Job]:
            await query.stage_jobs(limit=1000, queues=[QUEUE])
            fetched: list[Job] = await query.fetch_jobs(
                demand=1, queue=QUEUE, node=worker, uuid=producer
            )
            return fetched

        jobs = _run(stage_fetch())
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
        """Ack `completed`; the effect is the task body the machine ran before."""
        return self._ack(conn, _held_job(claim, self._cap))

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        return self._ack(conn, _held_job(claim, self._cap, error))

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        row = conn.execute(QUERIES["state"].text, {"job_id": int(job_id)}).fetchone()
        if row is None:
            raise LookupError(f"oban has no job {job_id}")
        return STATES[str(row[0])]

    def effect_key(self, claim: Claim) -> str:
        return f"oban-job-{claim.job_id}"


Queue = ObanQueue
