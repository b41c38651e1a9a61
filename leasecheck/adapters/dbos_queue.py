"""DBOS 3.4.0's workflow queues through the contract, on its own SQLAlchemy engine.

How DBOS maps onto the contract (read from dbos 3.4.0's `_queue.py`
(`queue_worker_thread`), `_core.py` (`execute_dequeued_workflow`, `persist`),
`_sys_db.py`, `_recovery.py` and `_dbos_config.py`):

- Connections: the library's own. Each of the harness's sessions gets a
  `SystemDatabase` as a launched DBOS makes it (`SystemDatabase.create` on the DSN the
  harness hands it, with the system database engine's defaults of
  `_dbos_config.configure_db_engine_parameters`: a pool of 20, `pool_pre_ping`), so
  every statement runs where DBOS sends it, through its own engine, pool and
  `db_retry`. LISTEN/NOTIFY is off (`use_listen_notify=False`, DBOS's polling mode): its
  listener thread would wait on a connection of its own between the harness's steps.
- A worker is one DBOS executor, whose `executor_id` is derived from the machine's
  worker name (unique per process, as DBOS asks of a distributed deployment), on one
  application version.
- Claim: one poll of the executor's queue thread (`queue_worker_thread`): a fresh
  `owner_xid` (`generate_uuid`), `start_queued_workflows` (the oldest `ENQUEUED` rows,
  `FOR UPDATE SKIP LOCKED`, flipped to `PENDING` with this executor, the token, and
  `recovery_attempts + 1`, in one READ COMMITTED transaction), then the statuses of
  what it took (`get_workflow_statuses`), then `execute_dequeued_workflow`'s first
  check: a workflow whose attempts passed `max_recovery_attempts + 1` is dead-lettered
  (`dead_letter_workflows`) and not run. The queue is declared with
  `worker_concurrency` = the number of jobs the machine asks for, and the executor
  runs nothing else (its running count 0), so a poll takes at most that many.
- Fencing token: `owner_xid`, one per poll. Every outcome is written by
  `update_workflow_outcome(..., owner_xid=...)`, which changes the row only while it is
  `PENDING` and still carries that token, and answers whether it did.
- Heartbeats and leases: DBOS writes none. Which executors are dead is decided by the
  recovery service DBOS documents for a distributed deployment, DBOS Conductor (a
  hosted service, not in the package), from the keepalive of each executor's
  websocket. The adapter stands in for Conductor's view with a table of pings
  (`leasecheck_dbos_conductor`): a claim and a heartbeat are the executor's ping,
  which keeps every workflow it runs (`heartbeat_renews = "worker"`) and answers
  nothing (`heartbeat_answers = False`).
- When a lease runs out: `maintain()` is the recovery Conductor orders for the
  executors whose pings stopped, run by DBOS's own `recover_pending_workflows` (its
  `PENDING` workflows of this version, `reenqueue_for_recovery`: back to `ENQUEUED`,
  the token cleared). A late executor's outcome is refused from then on, taken over
  or not (`revokes_expired = True`).
- Completion: the workflow function returned. `transactional_effects = False`: the
  machine runs the effect as the body (a step outside the system database: DBOS
  recommends the workflow id as its idempotency key, `effect_key`), and `complete()`
  is what `persist` does after it: the `SUCCESS` outcome with the serialized result.
- Failure: the workflow raised: the `ERROR` outcome. DBOS does not run a workflow
  again after it raised, so the first failure gives the job up (`max_failures = 1`).
- Retry cap: deliveries. Each claim counts one in `recovery_attempts`; the claim after
  `max_recovery_attempts + 1` runs dead-letters the workflow, so `max_attempts =
  max_recovery_attempts + 1`: 2 here (the workflow's `max_recovery_attempts` is 1; DBOS's
  default is 100, which no example reaches).
- State: `ENQUEUED` and `DELAYED` are queued, `PENDING` running, `SUCCESS` done;
  `ERROR`, `MAX_RECOVERY_ATTEMPTS_EXCEEDED` and `CANCELLED` failed.
- Time: every timestamp the claim, the outcome and recovery compare is the server's
  `now()`, the harness's clock.
- Enqueue: a `DBOSClient` (DBOS's API for enqueueing from outside an application) on
  the harness's connection (`PinnedEngine`).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import sqlalchemy as sa
from dbos import DBOSClient, EnqueueOptions
from dbos._core import _serialize_exception_for_persistence
from dbos._queue import _INTERNAL_QUEUE_CONSTRUCTION
from dbos._queue import Queue as WorkflowQueue
from dbos._recovery import recover_pending_workflows
from dbos._serialization import DefaultSerializer, serialize_value_as
from dbos._sys_db import SystemDatabase, WorkflowStatusString
from dbos._utils import GlobalParams, generate_uuid
from psycopg import Connection
from psycopg.conninfo import conninfo_to_dict

from leasecheck.adapters.pinned_sqlalchemy import PinnedEngine
from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Claim, Effect, JobId
from leasecheck.stateful.sqlfile import load

SQL = load(Path(__file__).with_name("dbos.sql"))
VERSION = version("dbos")
QUEUE = "leasecheck"
WORKFLOW = "leasecheck_job"
APP_VERSION = "leasecheck"
"""The application version every executor runs (a launch derives it from the workflows'
source; `recover_pending_workflows` reads it from DBOS's globals, set for that call
only: `_running_version`)."""
EXECUTORS = uuid.UUID("0c6f4b1e-2d4a-4c1b-9f3e-8a5d7e6b9c21")
"""The namespace of the executor ids derived from the machine's worker names."""

STATES = {
    WorkflowStatusString.ENQUEUED.value: QUEUED,
    WorkflowStatusString.DELAYED.value: QUEUED,
    WorkflowStatusString.PENDING.value: RUNNING,
    WorkflowStatusString.SUCCESS.value: DONE,
    WorkflowStatusString.ERROR.value: FAILED,
    WorkflowStatusString.MAX_RECOVERY_ATTEMPTS_EXCEEDED.value: FAILED,
    WorkflowStatusString.CANCELLED.value: FAILED,
}
"""DBOS's workflow statuses as the contract names them."""

ENGINE: dict[str, Any] = {
    "pool_timeout": 30,
    "max_overflow": 0,
    "pool_size": 20,
    "pool_pre_ping": True,
}
CONNECT: dict[str, Any] = {"application_name": "dbos_transact", "connect_timeout": 10}
"""A launched DBOS's system database engine, and its connect arguments
(`configure_db_engine_parameters`)."""


@dataclasses.dataclass(frozen=True)
class Owner:
    """A claim's token: the poll's `owner_xid`, and how the workflow's values are serialized."""

    xid: str
    serialization: str | None = dataclasses.field(compare=False, default=None)

    def __repr__(self) -> str:
        return self.xid[:8]


def _url(dsn: str) -> tuple[str, dict[str, Any]]:
    """The SQLAlchemy URL DBOS is configured with for `dsn` (its database), and the
    libpq parameters as connect arguments: a URL's host cannot be a socket directory."""
    params: dict[str, Any] = dict(conninfo_to_dict(dsn))
    return sa.URL.create("postgresql", database=params.get("dbname")).render_as_string(), params


class Client:
    """One session's DBOS: its system database, on an engine of its own."""

    def __init__(self, dsn: str) -> None:
        url, extra = _url(dsn)
        engine = {**ENGINE, "connect_args": {**CONNECT, **extra}}
        self.sys_db = SystemDatabase.create(
            system_database_url=url,
            engine_kwargs=engine,
            engine=None,
            schema=None,
            serializer=DefaultSerializer(),
            executor_id=None,
            use_listen_notify=False,
        )
        # What recovery reads of a launched DBOS: its system database and its logger.
        self.dbos = SimpleNamespace(_sys_db=self.sys_db, logger=logging.getLogger("dbos"))
        # An engine's first connection runs the dialect's set-up queries; made now, they
        # are not a round trip only a session's first call would make.
        with self.sys_db.engine.connect():
            pass


@contextmanager
def _running_version() -> Iterator[None]:
    """DBOS's global application version as `APP_VERSION`, for the block: recovery reads
    it there, and a process the adapter runs in may have a DBOS of its own."""
    before = GlobalParams.app_version
    GlobalParams.app_version = APP_VERSION
    try:
        yield
    finally:
        GlobalParams.app_version = before


def _queue(n: int) -> WorkflowQueue:
    """The queue as an executor polls it, with room for `n` workflows."""
    return WorkflowQueue(QUEUE, worker_concurrency=n, token=_INTERNAL_QUEUE_CONSTRUCTION)


def executor(worker: str) -> str:
    """The executor id of the machine's `worker`."""
    return str(uuid.uuid5(EXECUTORS, worker))


def _outcome(client: Client, claim: Claim, status: str, **value: str | None) -> bool:
    """Write the workflow's outcome if the claim's token still owns it; answer whether."""
    owner = cast(Owner, claim.token).xid
    written = client.sys_db.update_workflow_outcome(
        str(claim.job_id), status, owner_xid=owner, **value
    )
    return bool(written)


class DBOSQueue:
    """A DBOS executor's queue thread and workflow outcomes, one contract call at a time."""

    name = f"dbos-{VERSION}"
    ordered_tokens = False
    heartbeats = True
    heartbeat_answers = False
    heartbeat_renews = "worker"
    held_transactions = False
    transactional_effects = False
    revokes_expired = True
    max_failures = 1

    def __init__(self, max_recovery_attempts: int = 1) -> None:
        self.max_recovery_attempts = max_recovery_attempts
        self.max_attempts: int | None = max_recovery_attempts + 1
        self._pin: PinnedEngine | None = None
        self._client: DBOSClient | None = None

    def connect(self, name: str, dsn: str) -> Client:
        return Client(dsn)

    def disconnect(self, client: Client) -> None:
        client.sys_db.destroy()

    def install(self, conn: Connection[Any]) -> None:
        """DBOS's migrations and the version a launch registers, and Conductor's table."""
        conn.execute(SQL["install_conductor"].text)
        with self._lent(conn) as client:
            client._sys_db.run_migrations()
            client._sys_db.create_application_version(APP_VERSION)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(SQL["reset"].text)

    @contextmanager
    def _lent(self, conn: Connection[Any]) -> Iterator[DBOSClient]:
        """The `DBOSClient` on the harness's connection `conn`, for the block (made
        lazily, once: it is not a client of any worker's)."""
        if self._pin is None:
            self._pin = PinnedEngine(conn)
        with self._pin.lending(conn):
            if self._client is None:
                self._client = DBOSClient(
                    system_database_engine=self._pin.engine, use_listen_notify=False, lazy=True
                )
            yield self._client

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        """`DBOSClient.enqueue`, on the harness's connection."""
        options: EnqueueOptions = {"queue_name": QUEUE, "workflow_name": WORKFLOW}
        with self._lent(conn) as client:
            return str(client.enqueue(options, payload).get_workflow_id())

    def claim(self, client: Client, worker: str, lease: timedelta) -> Claim | None:
        claims = self.claim_many(client, worker, lease, 1)
        return claims[0] if claims else None

    def claim_many(self, client: Client, worker: str, lease: timedelta, n: int) -> list[Claim]:
        """The executor pings, then one poll of its queue thread takes up to `n`."""
        self._ping(client, worker, lease)
        sys_db = client.sys_db
        owner = generate_uuid()
        taken, _ = sys_db.start_queued_workflows(
            _queue(n), executor(worker), APP_VERSION, None, 0, owner_xid=owner
        )
        found = (
            {s["workflow_uuid"]: s for s in sys_db.get_workflow_statuses(taken)} if taken else {}
        )
        claims = []
        for workflow_id in taken:
            status = found.get(workflow_id) or sys_db.get_workflow_status(workflow_id)
            if status is None:
                continue
            attempts = status["recovery_attempts"]
            if attempts is not None and attempts > self.max_recovery_attempts + 1:
                sys_db.dead_letter_workflows([workflow_id], min_recovery_attempts=attempts)
                continue
            token = Owner(owner, status["serialization"])
            claims.append(Claim(job_id=workflow_id, token=token, worker=worker))
        return claims

    def heartbeat(self, client: Client, claim: Claim, lease: timedelta) -> None:
        """The executor's ping; it answers nothing."""
        self._ping(client, claim.worker, lease)

    def _ping(self, client: Client, worker: str, lease: timedelta) -> None:
        with client.sys_db.engine.begin() as c:
            c.execute(
                sa.text(SQL["ping"].text),
                {"executor": executor(worker), "seconds": lease.total_seconds()},
            )

    def maintain(self, client: Client) -> None:
        """Conductor's recovery of the executors whose pings stopped, by DBOS's own code."""
        with client.sys_db.engine.begin() as c:
            silent = [row[0] for row in c.execute(sa.text(SQL["silent"].text))]
        if silent:
            with _running_version():
                recover_pending_workflows(cast(Any, client.dbos), silent)

    def complete(self, client: Client, claim: Claim, effect: Effect) -> bool:
        """`persist` after the workflow returned: its `SUCCESS` outcome, fenced."""
        owner = cast(Owner, claim.token)
        output, _ = serialize_value_as(None, owner.serialization, client.sys_db.serializer)
        return _outcome(client, claim, WorkflowStatusString.SUCCESS.value, output=output)

    def fail(self, client: Client, claim: Claim, error: str) -> bool:
        """`persist` after the workflow raised: its `ERROR` outcome, fenced."""
        owner = cast(Owner, claim.token)
        serialized = _serialize_exception_for_persistence(
            RuntimeError(error), owner.serialization, client.sys_db.serializer
        )
        return _outcome(client, claim, WorkflowStatusString.ERROR.value, error=serialized)

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        row = conn.execute(SQL["state"].text, {"id": str(job_id)}).fetchone()
        assert row is not None, f"workflow {job_id} has no status row"
        return STATES[row[0]]

    def effect_key(self, claim: Claim) -> str:
        return f"dbos-workflow-{claim.job_id}"


Queue = DBOSQueue
