"""chancy 0.25.1 / 0.26.0 through the contract: its own Worker, Recovery and executor code.

How chancy maps onto the contract (read from chancy's `worker.py`, `app.py`,
`executors/base.py`, `plugins/recovery.py` and `migrations/` at both pins):

- Claim: `Worker.fetch_jobs` picks `pending`/`retrying` jobs with `attempts <
  max_attempts` and `scheduled_at <= NOW()`, `FOR UPDATE OF jobs SKIP LOCKED`, and sets
  them `running` with `taken_by` = the worker id and `started_at = NOW()`. From 0.26.0
  it also sets `claim_id = gen_random_uuid()`. `claim()` announces the worker first
  (`Worker.announce_worker`): a worker that fetches is a live process whose heartbeat
  task (`_maintain_heartbeat`, which announces at start and every 30 s) runs beside it.
- Fencing token: 0.26.0 has one, `claim_id`, a fresh uuid per claim (unordered). Every
  job update from the worker (`Worker.flush`) says `AND claim_id IS NOT DISTINCT FROM`
  the claim's, and Recovery sets it to NULL. 0.25.1 has none: updates match by `id`
  alone. There the claim carries what the row says about this execution, `taken_by`,
  `started_at` and `attempts` (fresh per fetch: a failure adds an attempt, and a
  recovery needs the worker silent for `heartbeat_timeout`, so a re-fetch starts
  later); chancy checks none of them.
- Heartbeats: chancy's is per worker: `announce_worker` upserts the worker's row in
  `chancy_workers` with `last_seen = NOW()`, and Recovery leaves alone every running job
  whose `taken_by` worker was seen within `heartbeat_timeout`. So the announcement is
  what keeps a job's lease; but it names no job and cannot refuse. One announcement
  keeps every job of the worker, so the adapter declares `heartbeat_renews = "worker"`.
  `heartbeat()` makes that call and then answers whether this claim still holds the job,
  from chancy's own row: in 0.26.0 the row is `running` under this claim's `claim_id`
  (recovery clears it; chancy tells the worker through its `job.recovered` event, on
  which `Worker._handle_recovery` cancels exactly that execution); in 0.25.1, which has
  no claim id and no such event, the row is `running`, `taken_by` this worker, with this
  fetch's `started_at` (recovery clears both, a re-fetch sets a new `started_at`). An
  adaptation: chancy never answers a heartbeat per job; the answer is read from its row.
- Whether that answer is judged (`heartbeat_answers`), per release. 0.26.0: yes. Its
  Recovery notifies `job.recovered` with the job and the claim it revoked
  (`plugins/recovery.py`, `recover`, line 128), and the worker cancels exactly that
  execution (`worker.py`: `self.hub.on("job.recovered", self._handle_recovery)`, line
  248; `_handle_recovery`, line 1102): what the row says, the worker's user sees.
  0.25.1: no (False). `announce_worker` returns None and its only notice is
  `worker.announced` (`worker.py`, lines 556-609); Recovery's only notice is
  `recovery.recovered` with a row count (`plugins/recovery.py`, lines 64-71), which the
  worker does not listen to; the one event the worker acts on is `job.cancelled`, sent
  only by the app's `cancel_job` (`worker.py`, line 214; `app.py`, line 1145). A
  0.25.1 user's execution runs on, told nothing, after its job was recovered or
  overwritten, so the row reading above is the adapter's, not chancy's answer: the
  machine still sends the announcement (it keeps the job's lease) but judges nothing
  from it.
- When a lease runs out: the leader's `Recovery` plugin (every 60 s, a sweeper) puts
  back to `pending` each `running` job whose `taken_by` worker has no `last_seen` within
  `heartbeat_timeout`, and adds 1 to its `max_attempts`. That is `maintain()`, run by
  the machine as an actor of its own; `heartbeat_timeout` is the constructor's (30 s, the
  harness's lease; chancy's default is 90 s).
- Revocation (`revokes_expired`): from 0.26.0, by design. `plugins/recovery.py` (the
  class docstring): "Recovery invalidates the old execution's claim and requests
  best-effort cancellation of that execution [...] Late updates from the old claim are
  discarded even if it keeps running"; `Worker.flush`: "Updates from a claim
  invalidated by recovery [...] are discarded". 0.25.1 recovers the row but writes a
  late update by id, so it revokes nothing (False).
- Completion: the executor's `on_job_completed` builds the new job row from the
  worker's in-memory `QueuedJob` (`succeeded`, attempts + 1; or `retrying`/`failed` at
  `attempts + 1 >= max_attempts`) and queues it; the worker writes it with `flush()`
  (0.26.0) or its `_maintain_updates` loop (0.25.1, run until the batch is written).
  An accepted update is the one chancy reports to `Plugin.on_job_updated` (0.26.0:
  claim matched and row updated; 0.25.1: every update). The task body runs before and
  outside that write (`AsyncExecutor` awaits the function, then calls
  `on_job_completed`), so `transactional_effects = False`: the machine runs the effect
  as the task body and `complete()` only reports.
- Retry cap: `max_attempts` on the job (default 1; 3 here) bounds the failures a worker
  reports; no Retry plugin, so a failure is `retrying` and due at once. It does not bound
  claims: Recovery deliberately raises it by one per rescue (its docstring: "increment
  the `max_attempts` counter by 1 to allow it to be retried"). chancy promises no cap on
  claims, so the adapter declares `max_attempts = None` (retry-cap is not judged) and
  keeps the job's own cap of 3 (`failures_allowed`).
- State (`state()`): chancy's `state` column: `pending`/`retrying` are queued,
  `running` is running, `succeeded` is done, `failed` is failed.
- Held transactions: none. Workers fetch, announce and flush on pool connections of
  their own, so `held_transactions = False`.
- Time: every statement says `NOW()` (and Python timestamps such as `completed_at` are
  only written, never compared), so no `advance_clock` is needed. A job's default
  `scheduled_at` is the wall clock's now, before the simulated epoch: due at once.

chancy runs on an `AsyncConnectionPool` of its own; the adapter gives the `Chancy` app
a pool that lends the harness's sync connection as an async one (`PinnedPool`), so the
statements and transactions are chancy's own, on the harness's connection. Jobs are
pushed with chancy's `sync_push_many_ex` on a cursor of that connection.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine
from contextlib import suppress
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any, TypeVar, cast

from chancy import Chancy, Job, QueuedJob, Worker
from chancy import Queue as QueueConfig
from chancy.executors.asyncex import AsyncExecutor
from chancy.plugin import Plugin
from chancy.plugins.recovery import Recovery
from psycopg import Connection
from psycopg.rows import dict_row

from leasecheck.adapters.pinned import PinnedPool
from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Claim, Effect, JobId
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("chancy.sql"))
QUEUE = "leasecheck"
FUNC = f"{__name__}.leasecheck_job"
EXECUTOR = f"{AsyncExecutor.__module__}.{AsyncExecutor.__qualname__}"
VERSION = version("chancy")
FENCED = not VERSION.startswith("0.25.")
LOG = logging.getLogger("leasecheck.chancy")
T = TypeVar("T")


def leasecheck_job(**payload: Any) -> None:
    """The function the adapter's jobs name (the harness runs the work, not chancy)."""


class _Raised(Exception):
    """The job's failure, as the harness reports it."""


@dataclasses.dataclass(frozen=True)
class Execution:
    """A claim's token: its key (claim_id; before 0.26 worker@started_at#attempts), the job."""

    key: str
    job: QueuedJob = dataclasses.field(compare=False, repr=False)

    def __repr__(self) -> str:
        return self.key


class _Updates(Plugin):  # type: ignore[misc]  # chancy ships no type information
    """Collects the job updates chancy reports as written (`on_job_updated`)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[QueuedJob] = []

    @staticmethod
    def get_identifier() -> str:
        return "leasecheck.updates"

    async def on_job_updated(self, *, worker: Worker, job: QueuedJob) -> None:
        self.written.append(job)


def _app(conn: Connection[Any], *plugins: Plugin) -> Chancy:
    """Return a Chancy app whose pool is the harness's connection."""
    app = Chancy("postgresql://", plugins=[Recovery(), *plugins], no_default_plugins=True, log=LOG)
    app.pool = cast(Any, PinnedPool(conn))
    return app


def _worker(app: Chancy, name: str, lease: timedelta) -> Worker:
    return Worker(
        app,
        worker_id=name,
        heartbeat_timeout=int(lease.total_seconds()),
        register_signal_handlers=False,
    )


def _pinned(app: Chancy) -> Any:
    return cast(PinnedPool, app.pool).conn


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def _write(worker: Worker) -> None:
    """Write the worker's queued updates the way this chancy release does."""
    if FENCED:
        await worker.flush()
        return
    # 0.25.1 has no flush(): run its update loop until it reports the batch written.
    worker.send_outgoing_interval = 0
    loop = asyncio.create_task(worker._maintain_updates())
    try:
        for _ in range(10_000):
            await asyncio.sleep(0)
            if loop.done():
                loop.result()
                raise RuntimeError("chancy's update loop ended without writing")
            if worker.outgoing.empty() and _written(worker.chancy):
                return
        raise RuntimeError("chancy's update loop did not write its batch")
    finally:
        loop.cancel()
        with suppress(asyncio.CancelledError):
            await loop


def _written(app: Chancy) -> list[QueuedJob]:
    return cast(_Updates, app.plugins[_Updates.get_identifier()]).written


STATES = {
    "pending": QUEUED,
    "retrying": QUEUED,
    "running": RUNNING,
    "succeeded": DONE,
    "failed": FAILED,
}
"""chancy's job states (`QueuedJob.State`) as the contract names them."""


class ChancyQueue:
    """chancy's worker, recovery and executor protocol, one contract call at a time."""

    name = f"chancy-{VERSION}"
    ordered_tokens = False
    heartbeats = True
    heartbeat_renews = "worker"
    held_transactions = False
    transactional_effects = False
    revokes_expired = FENCED
    heartbeat_answers = FENCED
    max_attempts: int | None = None

    def __init__(
        self, failures_allowed: int = 3, heartbeat_timeout: timedelta = timedelta(seconds=30)
    ) -> None:
        self._cap = failures_allowed
        self._timeout = heartbeat_timeout

    def install(self, conn: Connection[Any]) -> None:
        app = _app(conn)
        with conn.transaction():
            _run(app.migrate())
            with conn.cursor(row_factory=dict_row) as cur:
                app.sync_declare_ex(cur, QueueConfig(QUEUE, executor=EXECUTOR))
            conn.execute(QUERIES["install"].text)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(QUERIES["reset"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        row = conn.execute(QUERIES["next_priority"].text).fetchone()
        assert row is not None
        job = Job(
            func=FUNC, queue=QUEUE, kwargs=payload, max_attempts=self._cap, priority=int(row[0])
        )
        with conn.cursor(row_factory=dict_row) as cur:
            refs = _app(conn).sync_push_many_ex(cur, [job])
        return str(refs[0].identifier)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        app = _app(conn)

        async def announce_fetch() -> list[QueuedJob]:
            w = _worker(app, worker, lease)
            pinned = _pinned(app)
            await w.announce_worker(pinned)
            fetched: list[QueuedJob] = await w.fetch_jobs(QueueConfig(QUEUE), pinned, up_to=1)
            return fetched

        jobs = _run(announce_fetch())
        if not jobs:
            return None
        job = jobs[0]
        key = (
            str(job.claim_id) if FENCED else f"{worker}@{job.started_at.isoformat()}#{job.attempts}"
        )
        return Claim(job_id=str(job.id), token=Execution(key, job), worker=worker)

    def maintain(self, conn: Connection[Any]) -> None:
        """One pass of the leader's Recovery plugin, with the configured heartbeat timeout."""
        app = _app(conn)

        async def recover() -> None:
            leader = _worker(app, "leasecheck-leader", self._timeout)
            async with _pinned(app).cursor(row_factory=dict_row) as cursor:
                await Recovery.recover(leader, app, cursor)

        _run(recover())

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        app = _app(conn)

        async def announce() -> None:
            await _worker(app, claim.worker, lease).announce_worker(_pinned(app))

        _run(announce())
        held = cast(Execution, claim.token).job
        if FENCED:
            query, params = QUERIES["holds_claim"].text, {"claim_id": held.claim_id}
        else:
            query = QUERIES["holds_execution"].text
            params = {"worker": claim.worker, "started_at": held.started_at}
        return conn.execute(query, {"id": held.id, **params}).fetchone() is not None

    def _report(self, conn: Connection[Any], claim: Claim, exc: BaseException | None) -> bool:
        """Run the executor's completion path and write it; return whether chancy wrote it."""
        app = _app(conn, _Updates())
        held = cast(Execution, claim.token).job

        async def complete_and_write() -> None:
            w = _worker(app, claim.worker, self._timeout)
            executor = AsyncExecutor(w, QueueConfig(QUEUE))
            await executor.on_job_completed(job=held, exc=exc)
            await _write(w)

        _run(complete_and_write())
        return any(str(job.id) == claim.job_id for job in _written(app))

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        """Report success; the task body (the machine's effect) already ran, outside."""
        return self._report(conn, claim, None)

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        return self._report(conn, claim, _Raised(error))

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        row = conn.execute(QUERIES["state"].text, {"id": job_id}).fetchone()
        if row is None:
            raise LookupError(f"chancy has no job {job_id}")
        return STATES[str(row[0])]

    def effect_key(self, claim: Claim) -> str:
        return f"chancy-job-{claim.job_id}"


Queue = ChancyQueue
