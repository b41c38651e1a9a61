"""django-q2 1.11.1 with its ORM broker (Django 5.2) through the contract.

A harness worker is one `qcluster`: its pusher's `broker.dequeue()`, a worker process
running the task, and its monitor's `save_task` and `acknowledge`. How it maps onto the
contract (read from django-q2 1.11.1's `brokers/orm.py`, `pusher.py`, `worker.py`,
`monitor.py`, `tasks.py`, `conf.py` and `models.py`; line numbers are 1.11.1's):

- Settings, as a user of the ORM broker sets them (the docs' `orm` example, with the
  rule the docs give for `retry` and `timeout`): `Q_CLUSTER = {"name": "leasecheck",
  "orm": "default", "retry": 30, "timeout": 20, "max_attempts": 3, "poll": 0}`, all else
  the defaults (`bulk` 1, `save_limit` 250, `ack_failures` False, `sync` False).
  `retry` is the harness's lease (30 s in every run): django-q2's lease is that
  setting, not a per-claim argument, so `claim` ignores its `lease`. `max_attempts` 3
  is a user who caps retries (the default, 0, retries a failing task for ever).
  Adaptation: `poll` 0. An empty `dequeue` sleeps `poll` seconds of real time
  (orm.py:84) to spare the CPU; simulated time needs no such wait, and nothing else
  reads the setting.
- Enqueue: `async_task(leasecheck_job, **payload)` (tasks.py:21-78): a signed package
  in a `django_q_ormq` row, `lock` = now (orm.py:58-63). Its task id is the job id.
- Claim: the pusher's `broker.dequeue()` (pusher.py:45): the rows of this cluster's key
  with `lock < now()`, `[0:bulk]`, no `ORDER BY` and no row lock (orm.py:66-70), then
  for each `UPDATE ... SET lock = now + retry WHERE id = ... AND lock = <the lock it
  read>` (orm.py:74-79, `timeout`, orm.py:27-28): a compare-and-set, so of two clusters
  that read one row, one takes it. Then the pusher's unpacking (pusher.py:56-64:
  `SignedPackage.loads`, `cluster`, `ack_id`). An expired delivery is taken again by
  the same read: the lease is the `lock` column, and nothing else recovers a job, so
  no `maintain`.
- Fencing token: the `lock` the claim wrote (read by wrapping the broker's `timeout`,
  which computes it, to see what it returned: a spy, it changes nothing), as
  microseconds since the epoch. Each delivery writes a later one (`now + retry` after
  the last ran out), so `ordered_tokens`. Nothing the cluster holds is compared when it
  reports: the acknowledgement deletes the row by primary key alone (orm.py:89-93), the
  result is saved by task id (monitor.py:124-146).
- Heartbeats: none (`heartbeats = False`). A cluster never touches a row between the
  dequeue and the acknowledgement.
- Completion and failure: `worker()` itself (worker.py:36-135) on a task queue holding
  the package and `"STOP"`, with a real `multiprocessing.Value` timer, then `monitor()`
  itself (monitor.py:29-74) on the result queue it filled, with the cluster's broker:
  the task runs (`leasecheck_job`, which raises when the harness reports a failure),
  `save_task` (monitor.py:77-160) saves the result, and the monitor acknowledges a
  success (or an attempt at `max_attempts`, monitor.py:152-157), deleting the row. The
  library returns nothing. The answer is whether `save_task` wrote this delivery's
  outcome: Django's `post_save` of the `Task` row, sent on this call's thread right
  after that autocommit write (`task_obj.save()` monitor.py:131, `Task.objects.create`
  monitor.py:136), the signal django-q2's own result hook runs on (signals.py:11-12).
  No write means the library kept what it had instead: `save_task` updates a result
  only if the task has not succeeded yet (monitor.py:126), so a second success is
  discarded, and a failure after a success too. An error inside
  `save_task` (a lock timeout on its `select_for_update`, monitor.py:112-119, say) is
  logged and swallowed (monitor.py:159-160) and the monitor acknowledges the success
  anyway (monitor.py:51-53); the adapter does as the monitor does (no raise) and
  answers what was written: nothing, so False.
- Effects: the task body runs in the worker process before the monitor saves anything,
  on another connection in autocommit (`transactional_effects = False`): the machine
  runs the effect as the body, before `complete()`, which never calls it.
- Several jobs per worker: the pusher dequeues while the workers run (pusher.py:43-70,
  into a task queue of `queue_limit` = workers² packages, cluster.py:190), so a
  cluster holds several deliveries at once (`one_claim_per_worker = False`).
- Held transactions: none. The pusher, workers and monitor each run on connections of
  their own in autocommit; the only transaction is `save_task`'s pruning block.
- Retry cap: `max_attempts` counts the failures `save_task` recorded (`attempt_count`,
  monitor.py:130, 152-157), not deliveries: a delivery whose cluster died records
  nothing and the row is handed out again when its lock runs out, without limit. The
  docs say as much ("Limit the number of retry attempts for failed tasks"). So the code
  bounds no claims, and the adapter promises none (`max_attempts = None`); the cap's
  effect is still run, and a job given up at it shows failed.
- State (`state()`), from the library's tables: a task whose `Task` row succeeded is
  done (no later delivery's result replaces it, monitor.py:126). Else, a queue row with
  `lock <= now` is queued (the broker's `queue_size`, orm.py:30-35), one with a lock in
  the future is running (`lock_size`, "awaiting acknowledgement", orm.py:37-42), unless
  a failure was saved since that lock was taken (`Task.stopped` at or after `lock -
  retry`): then the attempt is over and the row waits out its lock for the retry
  (queued). No queue row: failed (given up at the cap; or acknowledged with no result
  saved, which the library cannot tell from a job that never existed).
- Watchdog: `timeout` is a SIGALRM around the task's own call (worker.py:103-104,
  timeout.py) and the guard's timer for a busy worker; neither runs while a package
  waits in the cluster's task queue or its result waits for the monitor, where the
  harness's pauses fall (the body is instant). Not modelled, and that leaves out
  nothing for an instant body.
- Time: django-q2's clock is Django's `timezone.now()` (orm.py:28, 33, 40, 61, 67;
  worker.py:120; tasks.py:67): every call runs inside `django_clock(conn)`.

Django runs on the harness's connection through `leasecheck.adapters.django`
(`ENGINE`, `use_connection`, `django_clock`). On import the module configures Django
with `ENGINE`, `django_q` installed and the `Q_CLUSTER` above, unless Django is already
configured, in which case those settings must provide `django_q` and `orm: default`.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from multiprocessing import Value
from typing import Any

import django
from django.apps import apps
from django.conf import settings
from psycopg import Connection, sql

from leasecheck.adapters.django import ENGINE, django_clock, psycopg_errors, use_connection
from leasecheck.stateful.contract import (
    DONE,
    FAILED,
    QUEUED,
    RUNNING,
    Claim,
    ContractError,
    Effect,
    JobId,
)

RETRY = 30
"""django-q2's `retry` (its lease), in seconds: the harness's lease."""

Q_CLUSTER = {
    "name": "leasecheck",
    "orm": "default",
    "retry": RETRY,
    "timeout": 20,
    "max_attempts": 3,
    "poll": 0,
}

if not settings.configured and not os.environ.get("DJANGO_SETTINGS_MODULE"):
    settings.configure(
        DATABASES={"default": {"ENGINE": ENGINE, "NAME": "leasecheck"}},
        INSTALLED_APPS=["django_q"],
        Q_CLUSTER=Q_CLUSTER,
        SECRET_KEY="leasecheck-django-q2",
        USE_TZ=True,
    )
django.setup()
if not apps.is_installed("django_q"):
    raise ContractError(
        "django-q2 adapter: Django is configured without django_q in INSTALLED_APPS; "
        "add it (with Q_CLUSTER's orm set to 'default'), or let the adapter configure "
        "Django itself"
    )

from django.core.management import call_command  # noqa: E402
from django.db.models.signals import post_save  # noqa: E402
from django.utils import timezone  # noqa: E402
from django_q.brokers import get_broker  # noqa: E402
from django_q.brokers.orm import ORM  # noqa: E402
from django_q.conf import Conf  # noqa: E402
from django_q.models import OrmQ, Task  # noqa: E402
from django_q.monitor import monitor  # noqa: E402
from django_q.signing import SignedPackage  # noqa: E402
from django_q.tasks import async_task  # noqa: E402
from django_q.worker import worker  # noqa: E402

if Conf.ORM != "default":
    raise ContractError(
        f"django-q2 adapter: Q_CLUSTER's orm is {Conf.ORM!r}; the adapter runs the ORM "
        "broker on the 'default' database"
    )
if Conf.RETRY != RETRY:
    raise ContractError(
        f"django-q2 adapter: Q_CLUSTER's retry is {Conf.RETRY!r}; the harness's lease is "
        f"{RETRY} s, and django-q2's lease is that setting"
    )

VERSION = version("django-q2")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)

_FAILURE: ContextVar[str | None] = ContextVar("leasecheck_django_q2_failure", default=None)
"""What the task raises when the worker calls it (None: it returns)."""

_SAVED: ContextVar[dict[str, bool] | None] = ContextVar("leasecheck_django_q2_saved", default=None)
"""Task id -> `success` of each `Task` row `save_task` wrote during this call."""


class JobFailed(Exception):
    """The failure the harness reports for a job (`fail()`), raised by the task."""


def leasecheck_job(**payload: Any) -> None:
    """The task the adapter enqueues. Its effect is the harness's, run before complete()."""
    failure = _FAILURE.get()
    if failure is not None:
        raise JobFailed(failure)


def _on_task_saved(sender: Any, instance: Task, **kwargs: Any) -> None:
    """Record a `Task` row written on this thread while a call is watching (post_save)."""
    saved = _SAVED.get()
    if saved is not None:
        saved[str(instance.id)] = bool(instance.success)


post_save.connect(_on_task_saved, sender=Task, weak=False, dispatch_uid="leasecheck_django_q2")


@dataclass(frozen=True)
class Delivery(Claim):
    """A claim: the task id, the `lock` the dequeue wrote (microseconds), the package."""

    task: dict[str, Any] = field(compare=False, repr=False)


def _package(claim: Claim) -> dict[str, Any]:
    """Return the package the pusher queued for this delivery (a copy: each run pops keys)."""
    if not isinstance(claim, Delivery):
        raise ContractError(f"django-q2 adapter: {claim!r} is not a claim it handed out")
    return dict(claim.task)


@contextmanager
def _call(conn: Connection[Any]) -> Iterator[None]:
    """One contract call: Django on `conn`, its clock at `conn`'s `now()`, psycopg's errors."""
    with psycopg_errors(), use_connection(conn), django_clock(conn):
        yield


def _broker() -> ORM:
    """Return the cluster's broker, as `get_broker()` builds it for `Q_CLUSTER`."""
    broker = get_broker()
    if not isinstance(broker, ORM):
        raise ContractError(f"django-q2 adapter: the broker is {type(broker).__name__}, not ORM")
    return broker


def _dequeue(broker: ORM) -> tuple[list[tuple[int, str]], list[datetime]]:
    """`broker.dequeue()`, and the locks its `timeout` computed (observed, not changed)."""
    locks: list[datetime] = []
    computed = broker.timeout

    def timeout(task: OrmQ) -> datetime:
        lock: datetime = computed(task)
        locks.append(lock)
        return lock

    broker.timeout = timeout  # type: ignore[method-assign, unused-ignore]
    try:
        return broker.dequeue() or [], locks
    finally:
        del broker.timeout


class DjangoQ2Queue:
    """django-q2's qcluster on the ORM broker, one contract call at a time."""

    name = f"django-q2-{VERSION}"
    max_attempts: int | None = None
    ordered_tokens = True
    heartbeats = False
    held_transactions = False
    transactional_effects = False
    one_claim_per_worker = False
    revokes_expired = False

    def install(self, conn: Connection[Any]) -> None:
        """Run django-q2's migrations (`manage.py migrate django_q`)."""
        with psycopg_errors(), use_connection(conn):
            call_command("migrate", "django_q", verbosity=0, interactive=False)

    def reset(self, conn: Connection[Any]) -> None:
        tables = [sql.Identifier(m._meta.db_table) for m in (OrmQ, Task)]
        conn.execute(sql.SQL("truncate {} restart identity").format(sql.SQL(", ").join(tables)))

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        """`async_task(leasecheck_job, **payload)`: a signed package in a queue row."""
        with _call(conn):
            return str(async_task(leasecheck_job, **payload))

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Delivery | None:
        """The pusher's turn (pusher.py:45-65): dequeue, unpack, tag with cluster and ack id.

        `lease` is not passed on: django-q2's lease is `retry` (`RETRY`, the harness's).
        """
        with _call(conn):
            task_set, locks = _dequeue(_broker())
        if not task_set:
            return None
        ack_id, payload = task_set[0]
        task: dict[str, Any] = SignedPackage.loads(payload)
        task["cluster"] = Conf.CLUSTER_NAME
        task["ack_id"] = ack_id
        lock = locks[-1]
        return Delivery(
            job_id=str(task["id"]), token=(lock - _EPOCH) // _US, worker=worker, task=task
        )

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        """django-q2 has no heartbeat (`heartbeats = False`): nothing to extend."""
        return False

    def _run(self, conn: Connection[Any], claim: Claim, failure: str | None) -> bool | None:
        """The cluster's worker, then its monitor, on the package; return what save_task wrote.

        True: a success; False: a failed attempt; None: nothing (the library kept what it
        had, or swallowed an error).
        """
        tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        tasks.put(_package(claim))
        tasks.put("STOP")
        said, saved = _FAILURE.set(failure), _SAVED.set({})
        try:
            with _call(conn):
                worker(tasks, results, Value("f", -1), Conf.TIMEOUT)
                results.put("STOP")
                monitor(results, _broker())
            return (_SAVED.get() or {}).get(str(claim.job_id))
        finally:
            _SAVED.reset(saved)
            _FAILURE.reset(said)

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        """The task returns: save_task saves the success, the monitor acknowledges it.

        The effect is the task body, which the machine ran before (module docstring).
        """
        return self._run(conn, claim, None) is True

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        """The task raises: save_task records a failed attempt (acknowledged at the cap)."""
        return self._run(conn, claim, error) is False

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        with _call(conn):
            found = Task.objects.filter(id=str(job_id)).first()
            if found is not None and found.success:
                return DONE
            rows = [
                r for r in OrmQ.objects.filter(key=Conf.CLUSTER_NAME) if r.task_id() == str(job_id)
            ]
            now = timezone.now()
        if not rows:
            return FAILED
        lock = rows[0].lock
        if lock <= now:
            return QUEUED
        if found is not None and found.stopped >= lock - timedelta(seconds=Conf.RETRY):
            return QUEUED
        return RUNNING

    def effect_key(self, claim: Claim) -> str:
        return f"django-q2-{claim.job_id}"


Queue = DjangoQ2Queue
