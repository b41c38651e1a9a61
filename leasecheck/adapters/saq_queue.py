"""saq 0.26.4 (`saq.queue.postgres.PostgresQueue`) through the contract, by its own code.

How saq maps onto the contract (read from saq 0.26.4's `saq/queue/postgres.py`,
`saq/queue/base.py`, `saq/job.py`, `saq/worker.py` and `saq/utils.py`; line numbers are
that release's):

- The queue: `PostgresQueue(pool=...)` on the harness's connection, through
  `leasecheck.adapters.pinned.PinnedPool`. saq reads the pool's `kwargs`, sets
  `autocommit` in them and refuses a pool whose connections are not autocommit
  (postgres.py lines 123-135); the harness's connections are. The schema is saq's own
  migration, `PostgresQueue.init_db` (lines 152-217; what `connect()` runs).
- A job: `Job(function, kwargs=payload, heartbeat=30, timeout=0, retries=3, ttl=0)`,
  enqueued with `Queue.enqueue` (base.py lines 314-357; the INSERT of postgres.py
  lines 700-755). `heartbeat` is saq's lease: "the maximum amount of time a job can
  survive without a heartbeat in seconds [...] a heartbeat can be triggered manually
  within a job by calling await job.update()" (job.py lines 86-87); 30 s, the
  harness's lease. `timeout=0` turns off saq's other limit, the job's total run time
  (default 10 s; `Job.stuck`, job.py lines 252-258, and the worker's `wait_for`), which
  would take the job from a live, heartbeating worker: the machine's jobs are as long
  as the machine makes them. `ttl=0` keeps a finished job's row, "0 means
  indefinitely" (job.py lines 89-90): with the default 600 the sweep deletes it after 10
  minutes, and a negative ttl deletes it at once (`_finish`, lines 836-851), so
  `state()` could not tell done from failed. `retries=3` is the cap (below). Each job
  gets a rising `priority` (the adapter's `saq.sql`): saq dequeues `ORDER BY priority,
  scheduled` (line 662) and `scheduled` is whole seconds, so equal priorities would
  tie in heap order; with it, jobs come out in enqueue order, every run alike.
- Claim: what one `Worker.process` task does before it runs the function
  (worker.py lines 347-358): `queue.dequeue()`, whose `_dequeue` (lines 636-698) takes
  up to one `queued` job due by `%(now)s >= scheduled`, `FOR UPDATE SKIP LOCKED`, sets
  it `active` and writes its `started`/`touched`; then `job.started = now()`,
  `job.attempts += 1`, `job.worker_id = <worker>` and `job.update(status=ACTIVE)`.
  When nothing is due, `dequeue` would wait for a notification, or poll
  (`Worker(poll_interval=...)`, lines 599-615); the adapter's queue object is not
  `connect()`ed, so the polling loop (`while self._connected`) ends at once and
  `dequeue` answers None: the statements are the same either way.
- Fencing token: none. saq's only record of an execution is the job blob each write
  carries whole (`_update`, lines 455-490: `UPDATE saq_jobs SET job = ..., status =
  ..., scheduled = ... WHERE key = %(key)s`): no attempt, worker or version in the
  WHERE. The claim's token is the worker's own in-memory `Job` of that dequeue (saq's
  worker keeps exactly that object and writes from it), named by a fresh id, so two
  executions never share a token; saq checks nothing of it.
- Heartbeats: `await job.update()` on the worker's in-memory job, as job.py line 87
  says: `Queue.update` sets `touched = now()` (base.py lines 116-121) and `_update`
  writes the whole blob back under whatever status the row has now (it reads it
  `FOR UPDATE`, lines 462-465), whoever holds the job. It returns None and raises
  nothing when the job was taken from this execution: fire and forget, so
  `heartbeat_answers = False` (the machine sends it, which keeps saq's lease, and
  judges nothing from it).
- When a lease runs out: saq's sweep, `PostgresQueue.sweep` (lines 357-453), is
  `maintain()`. Every worker calls it every 60 s (worker.py lines 298-309), and it runs
  only in the one that got `pg_try_advisory_lock(0, hashtext(queue))` (lines
  361-375), a session-level lock it keeps for life. The machine's sweeper plays that
  worker: each pass takes the lock with saq's own statement, and the adapter releases
  it when the pass ends. That changes nothing within an example, where every sweep
  runs on the sweeper's one session; it keeps the lock from outliving the example on
  a session the harness hands on (which then plays a worker, and nobody would sweep;
  the harness's session clean, `actors.clean`, now releases such locks too). A job is
  stuck when `active`/`aborting` and not touched
  for more than `heartbeat` seconds (`Job.stuck`); the sweep writes it `aborting`
  (`abort`, lines 573-579), waits for it to end (`job.refresh(abort)`, 5 s by
  default; job.py lines 310-331) and then, whether or not the execution stopped,
  re-queues it while `retryable`, else finishes it `aborted` (lines 444-452). The
  execution is told through its worker's `abort` upkeep, which every second cancels
  a task whose row shows `aborting`/`aborted` (worker.py lines 311-339). The adapter
  gives that wait 10 ms instead of 5 s: in the machine no worker acts while the sweep
  runs, so any wait ends the same way (the execution did not stop: its worker is the
  machine's stalled one, as a frozen process is; the witnesses use saq's 5 s).
- Completion: `job.finish(Status.COMPLETE)` (worker.py lines 376-377), i.e.
  `_finish`'s `update(status=complete)`, by key (lines 836-839). The task body runs
  before and outside it (`asyncio.create_task(function(...))`, lines 364-370), so
  `transactional_effects = False`: the machine runs the effect as the body and
  `complete()` only reports. saq answers nothing (None); the adapter answers whether
  saq's UPDATE matched the job's row (its row count, `PinnedPool.last_rowcount`), which
  with `ttl=0` it always does.
- Failure: worker.py lines 416-421: `job.retry(error)` while `job.retryable`, else
  `job.finish(Status.FAILED)`. `retry` (base.py lines 275-285, postgres.py lines
  816-823) writes the job `queued`, due at once (`retry_delay` 0), by key. Answered
  like completion.
- Retry cap: `retries=3` bounds executions, not only failures: the worker adds one to
  `attempts` each time it starts the job (worker.py line 356), and both the failure
  path (line 418) and the sweep (postgres.py line 449) re-queue only while
  `retryable`, `retries > attempts` (job.py lines 260-262); otherwise the job ends
  `failed` or `aborted`. So `max_attempts = 3`: saq promises at most that many
  executions.
- Revocation (`revokes_expired`): False. The sweep asks the execution to stop
  (`aborting`), but nothing refuses a late write: `_update` writes by key whatever the
  row shows, so a late owner's completion is never refused and nothing needs excusing.
- State (`state()`): saq's own `get_job_status` (lines 784-814): `queued` (and `new`)
  are queued, `active` and `aborting` running, `complete` done, `failed` and `aborted`
  failed.
- Held transactions: none. saq's pool is autocommit and each of its calls opens and
  ends its own transactions, so `held_transactions = False`.
- Time: saq takes time in Python, `time.time()` (`saq.utils.now` in milliseconds,
  `now_seconds`; `_retry`'s `time.time()`), and compares it with what it wrote: the
  dequeue's `%(now)s >= scheduled`, the sweep's `Job.stuck`. Every call runs inside
  `client_clock` (`leasecheck.adapters.client_clock`), so saq's clock answers the
  call's simulated `now()`, read from the call's connection; no `advance_clock`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Coroutine
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar, cast

import saq.queue.postgres
import saq.utils
from psycopg import Connection
from saq.job import Job, Status
from saq.queue.postgres import PostgresQueue
from saq.utils import now

from leasecheck.adapters.client_clock import client_clock
from leasecheck.adapters.pinned import PinnedPool
from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Claim, Effect, JobId
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("saq.sql"))
QUEUE = "leasecheck"
FUNCTION = "leasecheck_job"
VERSION = version("saq")
SWEEP_WAIT = 0.01
"""Seconds the sweep waits for a stuck execution to stop (saq's `abort`, 5 s by default)."""
CLOCKS = ((saq.utils, "time"), (saq.queue.postgres, "time"))
"""saq's `time.time()` callers: `now`/`now_seconds` (saq.utils) and `_retry` (postgres.py)."""
T = TypeVar("T")

STATES = {
    Status.NEW: QUEUED,
    Status.QUEUED: QUEUED,
    Status.ACTIVE: RUNNING,
    Status.ABORTING: RUNNING,
    Status.COMPLETE: DONE,
    Status.FAILED: FAILED,
    Status.ABORTED: FAILED,
}
"""saq's job statuses (`saq.job.Status`) as the contract names them."""


@dataclasses.dataclass(frozen=True)
class Execution:
    """A claim's token: a fresh id for one dequeue, and the worker's own `Job` of it."""

    key: str
    job: Job = dataclasses.field(compare=False, repr=False)

    def __repr__(self) -> str:
        return self.key


Step = Callable[[PostgresQueue, PinnedPool], Coroutine[Any, Any, T]]


def _call(conn: Connection[Any], step: Step[T]) -> T:
    """Run `step` on a PostgresQueue on `conn`, with saq's clock at the call's simulated now."""

    async def run() -> T:
        pool = PinnedPool(conn)
        return await step(PostgresQueue(pool=cast(Any, pool), name=QUEUE), pool)

    with client_clock(conn, *CLOCKS):
        return asyncio.run(run())


def _own(claim: Claim, queue: PostgresQueue) -> Job:
    """The worker's in-memory job of this claim, bound to this call's queue object."""
    job = cast(Execution, claim.token).job
    job.queue = queue
    return job


class SaqQueue:
    """saq's worker and sweep protocol, one contract call at a time."""

    name = f"saq-{VERSION}"
    ordered_tokens = False
    heartbeats = True
    heartbeat_answers = False
    held_transactions = False
    transactional_effects = False
    revokes_expired = False

    def __init__(self, retries: int = 3, heartbeat: timedelta = timedelta(seconds=30)) -> None:
        self.max_attempts: int | None = retries
        self._retries = retries
        self._heartbeat = int(heartbeat.total_seconds())

    def install(self, conn: Connection[Any]) -> None:
        async def migrate(queue: PostgresQueue, pool: PinnedPool) -> None:
            await queue.init_db()

        _call(conn, migrate)
        conn.execute(QUERIES["install"].text)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(QUERIES["reset"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        row = conn.execute(QUERIES["next_priority"].text).fetchone()
        assert row is not None
        job = Job(
            function=FUNCTION,
            kwargs=payload,
            heartbeat=self._heartbeat,
            timeout=0,
            retries=self._retries,
            ttl=0,
            priority=int(row[0]),
        )

        async def push(queue: PostgresQueue, pool: PinnedPool) -> Job | None:
            return await queue.enqueue(job)

        if _call(conn, push) is None:
            raise RuntimeError(f"saq did not enqueue {job.key}: the key exists")
        return str(job.key)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        async def process(queue: PostgresQueue, pool: PinnedPool) -> Job | None:
            # worker.py lines 347-358, up to the task's start.
            job = await queue.dequeue(poll_interval=1.0)
            if job is None:
                return None
            job.started = now()
            job.attempts += 1
            job.worker_id = worker
            await job.update(status=Status.ACTIVE)
            return job

        job = _call(conn, process)
        if job is None:
            return None
        execution = Execution(f"{worker}#{job.attempts}:{uuid.uuid4().hex[:8]}", job)
        return Claim(job_id=job.key, token=execution, worker=worker)

    def maintain(self, conn: Connection[Any]) -> None:
        """One pass of saq's sweep, in the worker holding the sweep lock."""

        async def sweep(queue: PostgresQueue, pool: PinnedPool) -> None:
            try:
                await queue.sweep(abort=SWEEP_WAIT)
            finally:
                if queue._has_sweep_lock:
                    await pool.conn.execute(
                        "select pg_advisory_unlock(%s, hashtext(%s))",
                        (queue.saq_lock_keyspace, queue.name),
                    )

        _call(conn, sweep)

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> None:
        """`await job.update()`: saq answers None."""

        async def touch(queue: PostgresQueue, pool: PinnedPool) -> None:
            await _own(claim, queue).update()

        _call(conn, touch)

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        """`job.finish(COMPLETE)`; the task body (the machine's effect) already ran, outside."""

        async def finish(queue: PostgresQueue, pool: PinnedPool) -> bool:
            await _own(claim, queue).finish(Status.COMPLETE, result=None)
            return pool.last_rowcount == 1

        return _call(conn, finish)

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        async def failed(queue: PostgresQueue, pool: PinnedPool) -> bool:
            # worker.py lines 418-421.
            job = _own(claim, queue)
            if job.retryable:
                await job.retry(error)
            else:
                await job.finish(Status.FAILED, error=error)
            return pool.last_rowcount == 1

        return _call(conn, failed)

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        async def status(queue: PostgresQueue, pool: PinnedPool) -> Status | None:
            return await queue.get_job_status(str(job_id))

        found = _call(conn, status)
        if found is None:
            raise LookupError(f"saq has no job {job_id}")
        return STATES[found]

    def effect_key(self, claim: Claim) -> str:
        return f"saq-job-{claim.job_id}"


Queue = SaqQueue
