"""procrastinate 3.10 through the contract: its own JobManager on the harness's connection.

How procrastinate maps onto the contract (read from procrastinate 3.10's `manager.py`,
`worker.py`, `retry.py`, `sql/schema.sql`, `sql/queries.sql` and its how-to
`docs/howto/production/retry_stalled_jobs.md`; line numbers are 3.10.0's):

- Claim: `JobManager.fetch_job` runs `procrastinate_fetch_job_v2`, a `FOR UPDATE OF jobs
  SKIP LOCKED` pick of the best `todo` job, set to `doing` with the fetching worker's id.
- Fencing token: none. Nothing a worker holds is compared when it finishes or retries a
  job; the row's `attempts` (bumped by every retry) is the nearest thing, so the claim
  carries it as its token, and it only grows (`ordered_tokens`).
- Heartbeats: per worker, not per job. `Worker.run` prunes stalled workers and then
  registers a row in `procrastinate_workers` (worker.py:445-452); its side task
  `_update_heartbeat` (worker.py:481-490, started by `_start_side_tasks`, 606-611) bumps
  `last_heartbeat` every `update_heartbeat_interval` (10 s) for as long as the process
  runs, whether it holds a job or not. One beat keeps every job of the worker, so the
  adapter declares `heartbeat_renews = "worker"`: the judge believes each beat renews
  all the worker's running leases, not only the claim it names. The machine fires
  heartbeats only for workers that hold a claim, so the adapter stands in for the loop
  where the machine does not:
  `claim()` bumps the fetching worker's heartbeat first (it is running, so its loop
  beat less than 10 s ago), and a worker that starts bumps, before it prunes, the
  heartbeat of every registered worker holding no `doing` job (their loops kept
  running while they were idle). Adaptation, favourable to procrastinate: an idle worker
  the machine paused (SIGSTOP) is refreshed too, though its loop stood still; the
  adapter cannot tell it from a running one. A worker paused while it held a job is not
  refreshed: past 30 s a starting worker prunes it (`procrastinate_prune_stalled_workers_v1`,
  schema.sql:553-561), its heartbeats then update nothing (refused here), and its next
  `fetch_job` violates the foreign key to `procrastinate_workers`, as procrastinate's own
  worker does (it never re-registers). A worker "starts" at its first claim: the
  machine's workers start lazily, so a start during another worker's 30 s standstill
  comes oftener here than in a deployment, where workers start on a deploy, a
  scale-up or a restart; it is reachable there all the same.
  `heartbeat()` is `JobManager.update_heartbeat` for the claim's worker. procrastinate
  returns nothing and never looks at a job: a worker's heartbeat keeps a job from being
  stalled exactly while the job is `doing` under that worker (queries.sql:39-53). So
  the adapter answers the contract's question, "does the claim still own the job and
  did its lease move", from those terms: the worker's row exists and the job is still
  `doing` under it with the attempts it was fetched with. A worker whose job was
  recovered, or fetched by another, beats on; its beat just holds nothing.
- When a lease runs out: a job is stalled when its worker's heartbeat is older than
  `seconds_since_heartbeat` (30 s, the harness's lease) or its worker row is gone
  (queries.sql:39-53). Nothing reclaims it by itself: the documented recipe is a
  periodic task that calls `get_stalled_jobs()` and `retry_job(job)` on each (back to
  `todo`, attempts + 1). That task is `maintain()`, which the machine runs as its own
  actor. A recovered job's late owner's `retry_job` is refused (it needs `doing` or
  `failed`, schema.sql:376-377); its `finish_job` is accepted (`todo` or `doing`,
  schema.sql:279-285).
- Recovery is not a revocation: the how-to says a worker's jobs are stalled when the
  worker "is terminated without a regular shutdown" and deprecates the age-based
  `nb_seconds` because it "may lead to wrongly retrying jobs that are still running".
  Ending a live execution is not the design, so `revokes_expired` is not declared.
- Completion is not fenced: `procrastinate_finish_job_v1` accepts any job in `todo` or
  `doing`, whoever holds it, and raises otherwise; that raise is the rejection.
- Effects: the worker runs the task body (`_process_job`, worker.py:261-330) and only
  then records the outcome with `finish_job` or `retry_job` (`_persist_job_status`,
  worker.py:165-189), each a statement of its own on a pool connection; no user code
  runs in that transaction. So `transactional_effects = False` and `complete()` never
  calls the effect: the machine runs it as the task body, before `complete`.
- Retry cap: `RetryStrategy(max_attempts=N)` retries a task that raised while
  `job.attempts < N` (retry.py:197), so a job that keeps failing runs at most N + 1
  times; `fail()` asks the strategy and then calls `retry_job` or `finish_job(failed)`,
  as the worker does. That cap is on failures, not on runs: the documented stalled-job
  recipe calls `retry_job` unconditionally and invites users to add their own rules,
  so procrastinate promises no bound on how often a job is fetched, and
  `max_attempts = None` (retry-cap is not judged; the failure cap is tested).
- Held transactions: none. procrastinate's worker runs each JobManager call on a pool
  connection of its own, committed at once; it never fetches, heartbeats or finishes
  inside a transaction its caller holds open, so `held_transactions = False` (held
  open, its prune and a worker's heartbeat deadlock on the workers/jobs foreign key).
- State: `state()` reads `procrastinate_jobs.status`: `todo` is queued, `doing` (and the
  legacy `aborting`) running, `succeeded` done; `failed`, `cancelled` and `aborted` are
  ended for good without a success, so failed.
- Time: every function and query says `now()` (column defaults too), which the
  harness shadows, so no `advance_clock` is needed. `retry_job` defaults `retry_at`
  to the wall clock's now, which is before the simulated epoch: due at once, as meant.

What the machine finds (`ci` profile, each violated property excused in turn,
2026-12-01): late-owner (a worker that stood still while another started is pruned and
beats into nothing) and fencing (a stale finish_job accepted while another worker runs
the job). Each has a witness under `matrix/witnesses/procrastinate-3.10/`, as have
exclusive-lease and owner-progress (a stale retry_job re-queues a job a live worker
holds), which that budget did not reach.

The adapter adds no SQL of its own to the queue's logic: it runs procrastinate's
`JobManager` coroutines over a connector pinned to the harness's connection
(procrastinate's own `SyncPsycopgConnector.*_with_connection` code), and keeps only a
map from the harness's worker names to procrastinate's worker ids
(`adapters/procrastinate.sql`), which it also reads to find idle workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

import psycopg
from procrastinate import connector, exceptions, jobs, manager, retry, schema
from procrastinate.sync_psycopg_connector import SyncPsycopgConnector
from psycopg import Connection

from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Claim, Effect, JobId
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("procrastinate.sql"))
QUEUE = "leasecheck"
TASK = "leasecheck.job"
T = TypeVar("T")
STATUS = {
    "todo": QUEUED,
    "doing": RUNNING,
    "aborting": RUNNING,
    "succeeded": DONE,
    "failed": FAILED,
    "cancelled": FAILED,
    "aborted": FAILED,
}
"""procrastinate's job statuses (schema.sql:23-31) as the contract's states."""


class _Pinned:
    """procrastinate's async connector interface, run on one psycopg connection.

    It delegates to procrastinate's own `SyncPsycopgConnector` methods that take a
    connection, so argument wrapping and result rows are procrastinate's.
    """

    def __init__(self, conn: Connection[Any]) -> None:
        self._conn = conn
        self._sync = SyncPsycopgConnector()

    def get_sync_connector(self) -> SyncPsycopgConnector:
        return self._sync

    async def execute_query_async(self, query: Any, **arguments: Any) -> None:
        self._sync.execute_query_all_with_connection(self._conn, query, **arguments)

    async def execute_query_one_async(self, query: Any, **arguments: Any) -> dict[str, Any]:
        row: dict[str, Any] = self._sync.execute_query_one_with_connection(
            self._conn, query, **arguments
        )
        return row

    async def execute_query_all_async(self, query: Any, **arguments: Any) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._sync.execute_query_all_with_connection(
            self._conn, query, **arguments
        )
        return rows


def _manager(conn: Connection[Any]) -> manager.JobManager:
    return manager.JobManager(cast(connector.BaseConnector, _Pinned(conn)))


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one JobManager coroutine; hand psycopg's own error back to the harness.

    procrastinate wraps every psycopg error in `ConnectorException`; the harness tells
    a lost connection (`psycopg.OperationalError`) from a refusal, so unwrap it.
    """
    try:
        return asyncio.run(coro)
    except exceptions.ConnectorException as exc:
        if isinstance(exc.__cause__, psycopg.Error):
            raise exc.__cause__ from None
        raise


def _refused(exc: psycopg.Error) -> bool:
    """Return whether `exc` is procrastinate refusing a job in the wrong status."""
    return isinstance(exc, psycopg.errors.RaiseException) and "(job id:" in str(exc)


class ProcrastinateQueue:
    """procrastinate's worker protocol, one contract call at a time."""

    name = "procrastinate"
    ordered_tokens = True
    heartbeats = True
    heartbeat_renews = "worker"
    held_transactions = False
    transactional_effects = False
    revokes_expired = False

    def __init__(self, retries: int = 2) -> None:
        self.strategy = retry.RetryStrategy(max_attempts=retries)
        self.max_attempts: int | None = None

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(schema.SchemaManager.get_schema())
            conn.execute(QUERIES["install"].text)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(QUERIES["reset"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        job = jobs.Job(
            id=None, queue=QUEUE, lock=None, queueing_lock=None, task_name=TASK, task_kwargs=payload
        )
        deferred = _manager(conn).batch_defer_jobs([job], connection=conn)
        assert deferred[0].id is not None
        return int(deferred[0].id)

    def _worker_id(self, conn: Connection[Any], worker: str, lease: timedelta) -> int:
        """Return the procrastinate worker id of `worker`, starting the worker if it is new.

        Starting is `Worker.run`'s: prune stalled workers, then register. Before that,
        the idle workers' heartbeat loops, which the machine does not run, beat.
        """
        row = conn.execute(QUERIES["worker_id"].text, {"name": worker}).fetchone()
        if row is not None:
            return int(row[0])
        jm = _manager(conn)
        for (idle,) in conn.execute(QUERIES["idle_workers"].text).fetchall():
            _run(jm.update_heartbeat(int(idle)))
        _run(jm.prune_stalled_workers(lease.total_seconds()))
        worker_id = _run(jm.register_worker())
        conn.execute(QUERIES["remember_worker"].text, {"name": worker, "worker_id": worker_id})
        return int(worker_id)

    def maintain(self, conn: Connection[Any]) -> None:
        """The documented periodic task: put every stalled job back to `todo`.

        `get_stalled_jobs()` with its default 30 s, the harness's lease. Like the
        recipe's task, a sweep ends at the first `retry_job` procrastinate refuses (a
        worker finished the job in between); the next sweep sees the rest.
        """
        jm = _manager(conn)
        for job in _run(jm.get_stalled_jobs()):
            try:
                with conn.transaction():
                    _run(jm.retry_job(job))
            except psycopg.Error as exc:
                if _refused(exc):
                    return
                raise

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        jm = _manager(conn)
        worker_id = self._worker_id(conn, worker, lease)
        _run(jm.update_heartbeat(worker_id))
        job = _run(jm.fetch_job(queues=[QUEUE], worker_id=worker_id))
        if job is None:
            return None
        assert job.id is not None
        return Claim(job_id=job.id, token=job.attempts, worker=worker)

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        row = conn.execute(QUERIES["worker_id"].text, {"name": claim.worker}).fetchone()
        if row is None:
            return False
        worker_id = int(row[0])
        _run(_manager(conn).update_heartbeat(worker_id))
        params = {"worker_id": worker_id, "job_id": int(claim.job_id), "attempts": claim.token}
        return conn.execute(QUERIES["holds"].text, params).fetchone() is not None

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        """`finish_job(succeeded)`, as `_persist_job_status` calls it after the task ran.

        The effect is the task body, which the machine ran before (see the module
        docstring): it is not called here.
        """
        try:
            with conn.transaction():
                _run(
                    _manager(conn).finish_job_by_id_async(
                        job_id=int(claim.job_id), status=jobs.Status.SUCCEEDED, delete_job=False
                    )
                )
        except psycopg.Error as exc:
            if _refused(exc):
                return False
            raise
        return True

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        row = conn.execute(QUERIES["status"].text, {"job_id": int(job_id)}).fetchone()
        if row is None:
            raise LookupError(f"procrastinate has no job {job_id}")
        return STATUS[str(row[0])]

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        job = jobs.Job(
            id=int(claim.job_id),
            queue=QUEUE,
            lock=None,
            queueing_lock=None,
            task_name=TASK,
            attempts=int(cast(int, claim.token)),
        )
        decision = self.strategy.get_retry_decision(exception=RuntimeError(error), job=job)
        jm = _manager(conn)
        try:
            with conn.transaction():
                if decision is not None:
                    _run(
                        jm.retry_job(
                            job,
                            retry_at=decision.retry_at,
                            priority=decision.priority,
                            queue=decision.queue,
                            lock=decision.lock,
                        )
                    )
                else:
                    _run(jm.finish_job(job, status=jobs.Status.FAILED, delete_job=False))
        except psycopg.Error as exc:
            if _refused(exc):
                return False
            raise
        return True

    def effect_key(self, claim: Claim) -> str:
        return f"procrastinate-job-{claim.job_id}"


Queue = ProcrastinateQueue
