"""Absurd 0.5.1 (`absurd_sdk.Absurd`, PyPI `absurd-sdk`) through the contract, by its own calls.

Absurd keeps its logic in SQL functions; the SDK is a thin client that calls them. The
schema is the one `absurdctl init` applies: `absurdctl` 0.5.1 bundles `absurd.sql` of
the same release (`absurdctl.BUNDLED_SCHEMA_SQL`, whose `get_schema_version()` answers
"0.5.1"). Line numbers below are absurd-sdk 0.5.1's `absurd_sdk/__init__.py` ("sdk") and
that bundled SQL text ("sql").

How Absurd maps onto the contract:

- The client: `Absurd(conn, queue_name="leasecheck")` on the harness's connection (sdk
  lines 1302-1322). Given a URL, the SDK opens its connection with `autocommit=True`
  (sdk line 1316), and every SDK call is one statement, so each is a transaction of its
  own: `held_transactions = False`.
- A job: a task spawned with `Absurd.spawn(TASK, payload, max_attempts=3)` (sdk lines
  1453-1508, `absurd.spawn_task`, sql lines 764-912): a task row (`t_`) and its first run
  (`r_`, attempt 1), due at once. No retry strategy, so a failed run's successor is due at
  once (`retry_delay_seconds(null)` is 0, sql lines 72-74).
- Claim: what `start_worker`'s loop does with `concurrency=1` (sdk lines 1660-1665):
  `claim_tasks(batch_size=1, claim_timeout=<lease>, worker_id=<worker>)` (sdk lines
  1602-1613, `absurd.claim_task`, sql lines 915-1078), then `_execute_task` up to the
  handler: the registration lookup and `_create_task_context` (sdk lines 1728-1775),
  which reads the task's checkpoints. `claim_task` first fails every expired run it can
  lock (at most one per claimed slot, `claim_expires_at <= now`, sql lines 985-1014,
  `fail_run` with `$ClaimTimeout`), then takes the first due `pending`/`sleeping` run
  `FOR UPDATE SKIP LOCKED` (sql lines 1016-1076) and writes `claim_expires_at = now +
  claim_timeout`. The token is the run's `attempt`: `fail_run` gives a task's next run
  `attempt + 1` (sql lines 1264-1306), so tokens of one task strictly increase
  (`ordered_tokens`); the claim also keeps the run id, which every later call names.
- Heartbeats: `TaskContext.heartbeat(seconds)` (sdk lines 892-903, `absurd.extend_claim`,
  sql lines 1555-1614), "Extend the current run's lease" as a handler calls it
  (docs/sdks/python.md lines 276-282): `claim_expires_at = now + seconds` while the run
  is `running`, the lease being the harness's (30 s).
  A run that was failed (by the claim sweep) raises SQLSTATE AB002, which the SDK turns
  into `FailedTask` (sdk lines 281-292); a cancelled task AB001, `CancelledTask`. Raised
  inside a handler they end the task (`_execute_task` catches both, sdk line 1795), so
  the adapter answers False for them and True when the call returns.
- Completion: `_complete_task_run` (sdk lines 334-344, `absurd.complete_run`, sql lines
  1081-1140), what `_execute_task` calls after the handler returned (sdk line 1794): the
  run must be `running`, else AB002/AB001 (sql lines 1108-1116), which the worker catches
  and ignores (sdk line 1795); the adapter answers False for them, as the run is not
  completed. The task body runs before, outside the completion, on the
  client's autocommit connection, so `transactional_effects = False`: the machine runs
  the effect as the body and `complete()` only reports.
- Failure: `_fail_task_run` (sdk lines 347-363, `absurd.fail_run`, sql lines
  1189-1332), what `_execute_task` calls when the handler raised (sdk lines 1797-1801),
  answered as completion is.
- Retry cap: `max_attempts` 3 on the task (the SDK's default is 5, sdk line 1306; 3 as
  in the other columns). `fail_run`, the worker's and the claim sweep's alike, creates a
  next run only while `attempt + 1 <= max_attempts` (sql line 1268), else the task is
  `failed`; every run is claimed at most once here (nothing sleeps), so at most 3 claims.
- Revocation (`revokes_expired`): True, by design. The recovery is inside `claim_task`:
  any worker's claim fails an expired run (sql lines 985-1014, the reason "worker did
  not finish task within claim interval") whether or not that claim then takes the
  task (another due run may come first, or the cap leaves no successor), and the late
  owner's heartbeat, completion and failure are then refused with AB002. The project's
  docs say so: a worker that "stops making progress before the claim expires" loses the
  task to another worker (docs/concepts.md lines 246-252, and the TypeScript SDK's
  table: `FailedTask`, "run already failed (e.g., claim expired)", docs/sdks/
  typescript.md line 406; read at the repository's commit 9b77b35, 0.4.0 and later,
  as the 0.5.1 tag is not in the snapshot read). Until someone claims, nothing revokes:
  a late owner's calls are accepted (`complete_run` and `extend_claim` read the run's
  state, not `claim_expires_at`).
- State (`state()`): `Absurd.fetch_task_result` (sdk lines 1510-1517, `get_task_result`,
  sql lines 729-756), the task's state: `pending`/`sleeping` queued, `running` running,
  `completed` done, `failed` and `cancelled` failed.
- Maintenance: none. Absurd has no reaper of its own besides the claim's sweep (its
  `cleanup_*` functions delete old finished tasks), so no `maintain`.
- Time: Absurd reads its clock through `absurd.current_time()` (sql lines 37-52), which
  answers `clock_timestamp()`, unqualified, unless the session sets `absurd.fake_now`
  (Absurd's own test hook, left unset). PL/pgSQL resolves it on the session's
  search_path, where the harness's clock schema comes before `pg_catalog`: Absurd's
  clock is the simulated one, with no adaptation. The SDK's Python clock
  (`_get_current_time`, sdk line 611) serves only `sleep_for`/`sleep_until`, unused here.
- Watchdogs: none to model. The sync worker runs the handler with no timeout (sdk lines
  1776-1793); the claim timeout lives in the database and the claim sweep enforces it,
  on simulated time. A task's `cancellation` policy (`max_duration`, `max_delay`) is not
  set, as by default.

Adaptations, each with its reason:

- The registered handler never runs: the machine plays the task body (its heartbeats,
  effect, completion or failure) between the contract's calls. It is registered so the
  claim takes `_execute_task`'s path for a known task.
- The `TaskContext` of a claim is kept with the claim and given the calling
  connection before each heartbeat, as the worker's context lives for the execution.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

import absurd_sdk
import absurdctl
from absurd_sdk import Absurd, CancelledTask, FailedTask, TaskContext
from psycopg import Connection

from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Effect, JobId
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("absurd.sql"))
QUEUE = "leasecheck"
TASK = "leasecheck_job"
VERSION = version("absurd-sdk")
STATES = {
    "pending": QUEUED,
    "sleeping": QUEUED,
    "running": RUNNING,
    "completed": DONE,
    "failed": FAILED,
    "cancelled": FAILED,
}
"""Absurd's task states (`TaskResultState`) as the contract names them."""
REFUSALS = (FailedTask, CancelledTask)
"""What the SDK raises for a run that is no longer its owner's (AB002, AB001), and the
worker catches and ignores (sdk line 1795)."""


def _handler(params: Any, ctx: TaskContext) -> None:
    raise AssertionError("the machine plays the task body; the adapter never runs a worker loop")


def _app(conn: Connection[Any]) -> Absurd:
    """The SDK's client on the harness's connection, with the task registered."""
    app = Absurd(conn, queue_name=QUEUE)
    app.register_task(name=TASK)(_handler)
    return app


@dataclass(frozen=True)
class AbsurdClaim:
    """A claimed run: its task, attempt (the token), run id and the worker's context."""

    job_id: str
    token: int
    worker: str
    run_id: str
    context: TaskContext = field(compare=False, repr=False)

    def __repr__(self) -> str:
        return f"task {self.job_id[-8:]} attempt {self.token}"


def _answered(call: Any, *args: Any) -> bool:
    """True when the SDK's call returned; False for the refusals its worker ignores."""
    try:
        call(*args)
    except REFUSALS:
        return False
    return True


class AbsurdQueue:
    """Absurd's spawn, claim, heartbeat, complete and fail, one contract call at a time."""

    name = f"absurd-{VERSION}"
    ordered_tokens = True
    heartbeats = True
    heartbeat_answers = True
    held_transactions = False
    transactional_effects = False
    revokes_expired = True

    def __init__(self, max_attempts: int = 3) -> None:
        self.max_attempts: int | None = max_attempts

    def install(self, conn: Connection[Any]) -> None:
        """`absurdctl init` (its bundled absurd.sql), then `Absurd.create_queue`."""
        with conn.transaction():
            conn.execute(absurdctl.BUNDLED_SCHEMA_SQL)
        row = conn.execute(QUERIES["schema_version"].text).fetchone()
        if row is None or row[0] != VERSION:
            raise RuntimeError(f"absurdctl's schema is {row}, the SDK is {VERSION}")
        _app(conn).create_queue(QUEUE)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(QUERIES["reset"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        spawned = _app(conn).spawn(TASK, payload, max_attempts=self.max_attempts)
        return str(spawned["task_id"])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> AbsurdClaim | None:
        """`claim_tasks` as `start_worker` calls it, then `_execute_task` up to the handler."""
        timeout = int(lease.total_seconds())
        tasks = _app(conn).claim_tasks(batch_size=1, claim_timeout=timeout, worker_id=worker)
        if not tasks:
            return None
        (task,) = tasks
        task_id = str(task["task_id"])
        context = absurd_sdk._create_task_context(task_id, conn, QUEUE, task, timeout)
        return AbsurdClaim(task_id, int(task["attempt"]), worker, str(task["run_id"]), context)

    def heartbeat(self, conn: Connection[Any], claim: AbsurdClaim, lease: timedelta) -> bool:
        """`ctx.heartbeat(seconds)`: `extend_claim` on the claimed run."""
        claim.context._conn = conn
        return _answered(claim.context.heartbeat, int(lease.total_seconds()))

    def complete(self, conn: Connection[Any], claim: AbsurdClaim, effect: Effect) -> bool:
        """`_complete_task_run` after the handler; the body (the machine's effect) ran outside."""
        return _answered(absurd_sdk._complete_task_run, conn, QUEUE, claim.run_id, None)

    def fail(self, conn: Connection[Any], claim: AbsurdClaim, error: str) -> bool:
        """`_fail_task_run` with the handler's exception, as `_execute_task` reports it."""
        reason = RuntimeError(error)
        return _answered(absurd_sdk._fail_task_run, conn, QUEUE, claim.run_id, reason)

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        snapshot = _app(conn).fetch_task_result(str(uuid.UUID(str(job_id))))
        if snapshot is None:
            raise LookupError(f"absurd has no task {job_id}")
        return STATES[str(snapshot.state)]

    def effect_key(self, claim: AbsurdClaim) -> str:
        return f"absurd-task-{claim.job_id}"


Queue = AbsurdQueue
