"""pgqueuer 1.6 driven through the contract, by its own `Queries` on the harness's connection.

How pgqueuer maps onto the contract (read from pgqueuer 1.6's `core/qm.py`,
`core/executors.py`, `core/heartbeat.py`, `adapters/persistence/queries.py` and `qb.py`):

- Claim: `Queries.dequeue` runs one statement that picks `queued` jobs with
  `FOR UPDATE SKIP LOCKED` and, in the same statement, `picked` jobs whose `heartbeat`
  is older than `heartbeat_timeout`, and sets them `picked` with `heartbeat = now()` and
  the worker's `queue_manager_id`. So lease expiry and re-pick are built in: no
  separate recovery call. `heartbeat_timeout` is the harness's lease (30 s, also
  pgqueuer's default).
- Fencing token: none. A re-pick of a stale job changes only `queue_manager_id` and the
  timestamps (`attempts` grows only on a requested retry). The claim carries
  `(queue_manager_id, attempts)`, what the row says about its holder, unordered.
  The worker's queue manager id is derived from its name (uuid5), so it stays the same
  across calls without state in the adapter (a crashed worker comes back under a new
  name, as a restarted process gets a new `uuid4`).
- The worker loop: when a dequeue re-picks a job this queue manager is still running
  (its own heartbeat was late), `QueueManager.run` skips it (`if job.id in
  self.job_context: continue`) and goes on with the rest of the batch. `claim()` does
  the same: it keeps the queue manager's `job_context` in a table of its own
  (`adapters/pgqueuer.sql`: added when a job is handed out, dropped when `complete` or
  `fail` ends its dispatch, as `forget_job` and the retry path's `pop` do) and, after
  skipping such a re-pick (whose heartbeat the dequeue refreshed), dequeues again, so it
  never hands a worker a job it already runs.
- Heartbeats: per job, fire and forget, so `heartbeat_answers = False`. The worker's
  `Heartbeat` task (`core/heartbeat.py`, `send_heartbeat`, lines 41-52) only adds the
  job id to a `HeartbeatBuffer` every `heartbeat_timeout / 2`; the buffer flushes it in
  the background through `Queries.update_heartbeat` (`core/buffers.py`, `flush_items`,
  lines 178-179), which returns None (`adapters/persistence/queries.py` lines 542-546)
  and runs `UPDATE ... SET heartbeat = NOW() WHERE id = ANY($1)` (`qb.py` lines
  752-753): it does not check who holds the job, and nothing reads a result, raises
  into the job or cancels its execution when the job is gone (a failed flush is only
  logged, `buffers.py` lines 73-74). `heartbeat()` makes that call and answers what it
  answers, None. (The adapter used to read the row after the call and answer whether
  the claim still held the job; that was its reading, not pgqueuer's answer, and the
  machine took it for a refusal of the owner: owner-progress and late-owner.)
- Completion is not fenced: `Queries.log_jobs` deletes the job by id (and logs it),
  whoever holds it; the statement's own row count says whether it found the job, and
  that is the acceptance. The task body runs before and outside it (`_dispatch` awaits
  `executor.execute`, then hands the status to a `JobStatusLogBuffer` that calls
  `log_jobs` later), so `transactional_effects = False`: the machine runs the effect as
  the task body and `complete()` only logs.
- Recovery: no sweeper. The dequeue statement itself re-picks stale `picked` jobs, so
  there is no `maintain()`. Nothing ends an expired execution either: a re-pick changes
  the holder but the old holder's `log_jobs` and `retry_job` still match by id, so
  `revokes_expired` is False.
- Retry cap: `DatabaseRetryEntrypointExecutor(max_attempts=N)` turns a failure into
  `retry_job` (back to `queued`, attempts + 1) while `job.attempts < N`, so a failing
  job runs at most N + 1 times; after that the failure is logged (`exception`: the job
  row is deleted). `fail()` runs that executor on a handler that raises. `retry_job`
  updates by id with no status check either. The retry delay is configured to zero
  (`initial_delay`), as procrastinate's default, so a retried job is due on the next
  tick. The cap counts failures only (`core/executors.py`, the class docstring: "After
  *max_attempts* consecutive failures the exception propagates as a terminal
  failure"); a stale re-pick is not an attempt, and pgqueuer promises no bound on
  picks, so the adapter declares `max_attempts = None` (retry-cap is not judged).
- State (`state()`): the queue row's status while there is one (`queued`, `picked` =
  running, `failed` = held for good); after `log_jobs` deleted it, the last final status
  logged for the job (`successful` = done; `exception`, `canceled`, `deleted` = failed).
- Held transactions: none. pgqueuer's drivers refuse a connection without autocommit
  ("required for proper operation of PgQueuer"): every call is its own transaction, so
  `held_transactions = False`.
- Time: every statement says `NOW()` (and column defaults `now()`), which the harness
  shadows, so no `advance_clock` is needed. The dequeue's `execute_after < NOW()` is
  strict and `enqueue` sets `execute_after = NOW() + execute_after`: as on a real clock,
  the harness moves time on (1 us) after each enqueue, so a job is due at the next claim.
  Retries keep pgqueuer's `NOW() + delay`: due once the clock moves.

The adapter adds none of pgqueuer's protocol in SQL of its own (its SQL keeps
`job_context` and reads `state()`): it calls pgqueuer's
`Queries` coroutines through a driver
that runs them on the harness's connection the way pgqueuer's own `SyncPsycopgDriver`
does (raw `$n` placeholders, dict rows), and returns each statement's status line.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import anyio
from pgqueuer import models, types
from pgqueuer.errors import RetryRequested
from pgqueuer.executors import DatabaseRetryEntrypointExecutor, EntrypointExecutorParameters
from pgqueuer.queries import EntrypointExecutionParameter, Queries
from psycopg import Connection, RawCursor
from psycopg.rows import dict_row

from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Claim, Effect, JobId
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("pgqueuer.sql"))
ENTRYPOINT = "leasecheck"
WORKERS = uuid.UUID("5f1d7c1e-58a4-4f7e-9a53-4c1f0b2f8a10")
T = TypeVar("T")
STATES = {
    "queued": QUEUED,
    "picked": RUNNING,
    "failed": FAILED,
    "successful": DONE,
    "exception": FAILED,
    "canceled": FAILED,
    "deleted": FAILED,
}
"""pgqueuer's job statuses (`JOB_STATUS`), in its queue or its log, as the contract names them."""


class _Driver:
    """pgqueuer's driver interface on one sync psycopg connection; keeps the last status line."""

    def __init__(self, conn: Connection[Any]) -> None:
        self._conn = conn
        self.status = ""

    async def fetch(self, query: str, *args: object) -> list[dict[str, object]]:
        cursor = RawCursor(self._conn, row_factory=dict_row)
        cursor.execute(query, args or None)
        self.status = cursor.statusmessage or ""
        return cursor.fetchall()

    async def execute(self, query: str, *args: object) -> str:
        cursor = RawCursor(self._conn)
        cursor.execute(query, args or None)
        self.status = cursor.statusmessage or ""
        return self.status


class Status(Protocol):
    """A pgqueuer driver that keeps the status line of its latest `execute`."""

    status: str

    async def fetch(self, query: str, *args: object) -> list[dict[str, object]]: ...

    async def execute(self, query: str, *args: object) -> str: ...


Step = Callable[[Queries, Status], Coroutine[Any, Any, T]]


def on_harness(conn: Connection[Any], step: Step[T]) -> T:
    """Run `step` on pgqueuer's `Queries` over the harness's connection `conn`."""
    driver = _Driver(conn)
    return asyncio.run(step(Queries(cast(Any, driver)), driver))


def _rows(status: str) -> int:
    """Return the row count of a status line such as 'INSERT 0 1' or 'UPDATE 1'."""
    return int(status.split()[-1]) if status and status.split()[-1].isdigit() else 0


def queue_manager_id(worker: str) -> uuid.UUID:
    """Return the queue manager id of a simulated worker (stable for its name)."""
    return uuid.uuid5(WORKERS, worker)


def _job(claim: Claim) -> models.Job:
    """The worker's in-memory job, as far as pgqueuer's failure path reads it."""
    _, attempts = cast(tuple[str, int], claim.token)
    return models.Job.model_construct(
        id=int(claim.job_id), attempts=attempts, entrypoint=ENTRYPOINT
    )


class _Raised(Exception):
    """The job handler's failure, as the harness reports it."""


class PgQueuerQueue:
    """pgqueuer's queue manager protocol, one contract call at a time."""

    name = "pgqueuer"
    ordered_tokens = False
    heartbeats = True
    heartbeat_answers = False
    held_transactions = False
    transactional_effects = False
    revokes_expired = False
    max_attempts: int | None = None

    def __init__(self, retries: int = 2) -> None:
        self.retries = retries

    def _call(self, conn: Any, step: Step[T]) -> T:
        """Run a worker's `step` where its calls run: here, the harness's connection."""
        return on_harness(conn, step)

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            on_harness(conn, lambda queries, _: queries.install())
            conn.execute(QUERIES["install"].text)

    def reset(self, conn: Connection[Any]) -> None:
        async def clear(queries: Queries, _: Status) -> None:
            await queries.clear_queue()
            await queries.clear_queue_log()
            await queries.clear_statistics_log()

        on_harness(conn, clear)
        conn.execute(QUERIES["reset"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        payload_bytes = json.dumps(payload).encode()
        ids = on_harness(conn, lambda queries, _: queries.enqueue(ENTRYPOINT, payload_bytes))
        return int(ids[0])

    def claim(self, conn: Any, worker: str, lease: timedelta) -> Claim | None:
        qm = queue_manager_id(worker)

        async def dispatch(queries: Queries, driver: Status) -> Claim | None:
            rows = await driver.fetch(QUERIES["running_here"].text, qm)
            running = {row["job_id"] for row in rows}
            # Each skipped re-pick refreshed that job's heartbeat, so the next dequeue
            # cannot pick it again: at most one more dequeue per job running here.
            for _ in range(len(running) + 1):
                picked = await queries.dequeue(
                    batch_size=1,
                    entrypoints={
                        types.QueueEntrypoint(ENTRYPOINT): EntrypointExecutionParameter(
                            concurrency_limit=0
                        )
                    },
                    queue_manager_id=types.QueueManagerId(qm),
                    global_concurrency_limit=None,
                    heartbeat_timeout=lease,
                )
                if not picked:
                    return None
                job = picked[0]
                if job.id in running:
                    continue
                await driver.execute(QUERIES["remember"].text, qm, job.id)
                return Claim(job_id=int(job.id), token=(str(qm), job.attempts), worker=worker)
            return None

        return self._call(conn, dispatch)

    async def _forget(self, driver: Status, claim: Claim) -> None:
        """The dispatch task ended: drop the job from its queue manager's job_context."""
        qm, _ = cast(tuple[str, int], claim.token)
        await driver.execute(QUERIES["forget"].text, uuid.UUID(qm), int(claim.job_id))

    def heartbeat(self, conn: Any, claim: Claim, lease: timedelta) -> None:
        """What the worker's `HeartbeatBuffer` sends; pgqueuer answers None."""
        self._call(conn, lambda queries, _: queries.update_heartbeat([cast(Any, claim.job_id)]))

    def complete(self, conn: Any, claim: Claim, effect: Effect) -> bool:
        """Log success; the task body (the machine's effect) already ran, outside."""

        async def log(queries: Queries, driver: Status) -> bool:
            await self._forget(driver, claim)
            await queries.log_jobs([(_job(claim), "successful", None)])
            return _rows(driver.status) == 1

        return self._call(conn, log)

    def fail(self, conn: Any, claim: Claim, error: str) -> bool:
        job = _job(claim)

        async def handler(_: models.Job) -> None:
            raise _Raised(error)

        executor = DatabaseRetryEntrypointExecutor(
            parameters=EntrypointExecutorParameters(concurrency_limit=0, func=handler),
            max_attempts=self.retries,
            initial_delay=timedelta(0),
        )

        async def run_and_report(queries: Queries, driver: Status) -> bool:
            await self._forget(driver, claim)
            context = models.Context(cancellation=anyio.CancelScope())
            try:
                await executor.execute(job, context)
            except RetryRequested as retry:
                record = models.TracebackRecord.from_exception(exc=retry, job_id=job.id)
                await queries.retry_job(job, retry.delay, record)
            except _Raised as exc:
                record = models.TracebackRecord.from_exception(exc=exc, job_id=job.id)
                await queries.log_jobs([(job, "exception", record)])
            return _rows(driver.status) == 1

        return self._call(conn, run_and_report)

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        row = conn.execute(QUERIES["state"].text, {"id": job_id}).fetchone()
        if row is None or row[0] is None:
            raise LookupError(f"pgqueuer has no job {job_id}, queued or logged")
        return STATES[str(row[0])]

    def effect_key(self, claim: Claim) -> str:
        return f"pgqueuer-job-{claim.job_id}"


Queue = PgQueuerQueue
