"""django-tasks-db 0.13.0 (django-tasks 0.12.0, Django 5.2) through the contract.

django-tasks 0.12.0 is the backport of Django's Tasks framework (`django.tasks`) and
ships no database backend any more; django-tasks-db 0.13.0 is that backend: a
`DBTaskResult` model and the `db_worker` management command. How it maps onto the
contract (read from django-tasks-db 0.13.0's `models.py`,
`management/commands/db_worker.py`, `backend.py` and `utils.py`; line numbers are
0.13.0's):

- Claim: `db_worker`'s loop (`Worker.run`, db_worker.py:106-135) builds
  `DBTaskResult.objects.ready()` (`status = READY` and due, models.py:109-117) for its
  backend and queues, and inside `exclusive_transaction` (utils.py:16-37, a plain
  `transaction.atomic` on PostgreSQL) takes `get_locked()` (`select_for_update(
  skip_locked=True).first()`, models.py:131-135) and `claim(worker_id)`s it: status
  `RUNNING`, `started_at`, the worker id appended to `worker_ids` (models.py:256-263).
  `claim()` runs exactly those lines of the loop, with the library's functions, for a
  `Worker` built with `db_worker`'s defaults (queue `default`, backend `default`) and
  the harness's worker name as its `--worker-id`.
- Fencing token: none. Nothing a worker holds is compared when it writes a result.
  The claim carries the row's count of claims, `len(worker_ids)` (which `claim()`
  appends to), so tokens would increase if a task were ever claimed again
  (`ordered_tokens`); it never is (below).
- Heartbeats: none (`heartbeats = False`). A worker writes to a task's row when it
  claims it and when it records the result, nothing in between; `db_worker` has no
  side thread and no worker table.
- When a lease runs out: nothing happens. No code in the package sets a row back to
  `READY` (only the model's default does, models.py:144) and nothing looks at
  `started_at`: there is no lease, timeout, sweeper or retry, so the adapter has no
  `maintain` and `claim()` recovers nothing. A task whose worker died stays `RUNNING`
  for good, also after a worker restarts under the same `--worker-id`: the open issue
  https://github.com/RealOrangeOne/django-tasks-db/issues/5 ("Unclean exits of the
  worker leave tasks in limbo"), where the maintainer's proposed fix (a starting
  worker fails the running tasks of its own id, or a grace period) is not released.
- Retry cap: a task is claimed at most once (`ready()` reads only `READY` rows, and
  none comes back), and a task that raises is `FAILED` for good (`set_failed`,
  models.py:283-299; nothing in either package re-queues a failed task). So
  `max_attempts = 1`: the code's bound on claims, which retry-cap checks.
- Completion: `Worker.run_task` (db_worker.py:163-205) calls the task, then
  `set_successful(return_value)`, or `set_failed(exc)` if anything raised, and sends
  `task_started` / `task_finished`. Both save the row by primary key with
  `update_fields` (models.py:265-299), whatever its status says now, each retried 3
  times 0.1 s apart (`@retry`, utils.py:53-76). `complete()` and `fail()` call
  `run_task` itself on the instance `claim()` fetched (as the loop passes it on), with
  the adapter's task, which returns or raises what the harness says; they answer
  whether the row was saved `SUCCESSFUL` (`FAILED`), as `run_task` leaves the
  instance. A save that matched no row raises, and that raise is the answer.
- Effects: the task body runs before and outside the result's save, each statement
  on the worker's connection in autocommit; no user code runs in the transaction
  that records the result. So `transactional_effects = False`: the machine runs the
  effect as the task body, before `complete()`, which never calls it.
- One job at a time: the loop claims one task, runs it to its end, then loops
  (db_worker.py:116-161), so `one_claim_per_worker = True`.
- Held transactions: none. `db_worker` runs on its own connection in autocommit; its
  only transaction is the claim's, which it opens and commits itself. So
  `held_transactions = False`.
- State (`state()`): the backend's `get_result(id).status` (backend.py:134-140),
  django-tasks' `TaskResultStatus`: `READY` is queued, `RUNNING` running,
  `SUCCESSFUL` done, `FAILED` failed.
- Revocation: nothing ever ends an execution (`revokes_expired = False`).
- Time: django-tasks-db's clock is Django's, `timezone.now()`, the client's: it stamps
  `started_at` (`claim()`), `finished_at` (`set_successful`, `set_failed`) and
  `enqueued_at` (`auto_now_add`) with it and bounds `ready()`'s `run_after__lte` by it,
  and never says `now()` in SQL. Every call runs inside `django_clock(conn)`
  (`leasecheck.adapters.django`), so that clock answers the call's simulated `now()`,
  read on the call's connection, as every other timestamp of the harness does. Nothing
  compares `started_at`, and these tasks have no `run_after` (stored as the far future,
  which `ready()` takes as due at once), so no decision of the library moves with it.

Django runs on the harness's connection through `leasecheck.adapters.django`
(`ENGINE`, `use_connection`, `django_clock`): every ORM statement, migration and `atomic` block of
django-tasks-db is its own, on the connection the call got; Django's errors are
re-raised as the psycopg errors under them, so a cut connection reads as one. On
import, the module configures Django with `ENGINE`, django-tasks and django-tasks-db
installed and a `default` task backend of django-tasks-db, unless Django is already
configured (`DJANGO_SETTINGS_MODULE` or `settings.configure`), in which case those
settings must provide the same.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import version
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
    ContractError,
    Effect,
    JobId,
)

if not settings.configured and not os.environ.get("DJANGO_SETTINGS_MODULE"):
    settings.configure(
        DATABASES={"default": {"ENGINE": ENGINE, "NAME": "leasecheck"}},
        INSTALLED_APPS=["django_tasks", "django_tasks_db"],
        TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}},
        USE_TZ=True,
    )
django.setup()
if not apps.is_installed("django_tasks_db"):
    raise ContractError(
        "django-tasks-db adapter: Django is configured without django_tasks_db in "
        "INSTALLED_APPS; add it (and a TASKS 'default' backend of "
        "django_tasks_db.DatabaseBackend), or let the adapter configure Django itself"
    )

from django.core.management import call_command  # noqa: E402
from django.db.utils import OperationalError  # noqa: E402
from django_tasks_db.backend import DatabaseBackend  # noqa: E402
from django_tasks_db.compat import (  # noqa: E402
    DEFAULT_TASK_BACKEND_ALIAS,
    DEFAULT_TASK_QUEUE_NAME,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
)
from django_tasks_db.management.commands.db_worker import Worker  # noqa: E402
from django_tasks_db.models import DBTaskResult  # noqa: E402
from django_tasks_db.utils import (  # noqa: E402
    exclusive_transaction,
    is_locked_database_exception,
)

try:
    from django.tasks import task  # Django >= 6.0
except ImportError:
    from django_tasks import task

if not isinstance(task_backends[DEFAULT_TASK_BACKEND_ALIAS], DatabaseBackend):
    raise ContractError(
        f"django-tasks-db adapter: the TASKS {DEFAULT_TASK_BACKEND_ALIAS!r} backend is "
        f"{type(task_backends[DEFAULT_TASK_BACKEND_ALIAS]).__name__}; make it "
        "django_tasks_db.DatabaseBackend"
    )

VERSION = version("django-tasks-db")
STATES = {
    TaskResultStatus.READY: QUEUED,
    TaskResultStatus.RUNNING: RUNNING,
    TaskResultStatus.SUCCESSFUL: DONE,
    TaskResultStatus.FAILED: FAILED,
}
"""django-tasks' `TaskResultStatus` as the contract's states."""

_FAILURE: ContextVar[str | None] = ContextVar("leasecheck_django_tasks_db_failure", default=None)
"""What the task raises when `run_task` calls it (None: it returns)."""


class JobFailed(Exception):
    """The failure the harness reports for a job (`fail()`), raised by the task."""


@task()  # type: ignore[untyped-decorator]  # django-tasks is read as untyped (pyproject)
def leasecheck_job(**payload: Any) -> None:
    """The task the adapter enqueues. Its effect is the harness's, run before complete()."""
    failure = _FAILURE.get()
    if failure is not None:
        raise JobFailed(failure)


@dataclass(frozen=True)
class Execution:
    """A claim: the task's id, `len(worker_ids)` after the claim, and the fetched row."""

    job_id: str
    token: int
    worker: str
    result: DBTaskResult = field(compare=False, repr=False)


@contextmanager
def _call(conn: Connection[Any]) -> Iterator[None]:
    """One contract call: Django on `conn`, its clock at `conn`'s `now()`, psycopg's errors."""
    with psycopg_errors(), use_connection(conn), django_clock(conn):
        yield


def _worker(worker_id: str) -> Worker:
    """Return `db_worker`'s Worker as `manage.py db_worker --worker-id ID` builds it."""
    return Worker(
        queue_names=[DEFAULT_TASK_QUEUE_NAME],
        interval=1,
        batch=False,
        backend_name=DEFAULT_TASK_BACKEND_ALIAS,
        startup_delay=True,
        max_tasks=None,
        worker_id=worker_id,
        excluded_queue_names=[],
    )


class DjangoTasksDbQueue:
    """django-tasks-db's db_worker, one contract call at a time."""

    name = f"django-tasks-db-{VERSION}"
    max_attempts: int | None = 1
    ordered_tokens = True
    heartbeats = False
    held_transactions = False
    transactional_effects = False
    one_claim_per_worker = True
    revokes_expired = False

    def install(self, conn: Connection[Any]) -> None:
        """Run django-tasks-db's migrations (`manage.py migrate`)."""
        with psycopg_errors(), use_connection(conn):
            call_command("migrate", DBTaskResult._meta.app_label, verbosity=0, interactive=False)

    def reset(self, conn: Connection[Any]) -> None:
        table = sql.Identifier(DBTaskResult._meta.db_table)
        conn.execute(sql.SQL("truncate {} restart identity").format(table))

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        """`leasecheck_job.enqueue(**payload)`: the backend's `enqueue` inserts a READY row."""
        with _call(conn):
            result = leasecheck_job.enqueue(**payload)
        return str(result.id)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Execution | None:
        """One turn of `Worker.run`'s claim (db_worker.py:110-132), with its own calls."""
        w = _worker(worker)
        with _call(conn):
            tasks = DBTaskResult.objects.ready().filter(backend_name=w.backend_name)
            if not w.process_all_queues:
                tasks = tasks.filter(queue_name__in=w.queue_names)
            if w.excluded_queue_names:
                tasks = tasks.exclude(queue_name__in=w.excluded_queue_names)
            with exclusive_transaction(tasks.db):
                try:
                    task_result = tasks.get_locked()
                    if task_result is not None:
                        task_result.claim(w.worker_id)
                except OperationalError as e:
                    if is_locked_database_exception(e):
                        task_result = None
                    else:
                        raise
        if task_result is None:
            return None
        return Execution(
            job_id=str(task_result.id),
            token=len(task_result.worker_ids),
            worker=worker,
            result=task_result,
        )

    def heartbeat(self, conn: Connection[Any], claim: Execution, lease: timedelta) -> bool:
        """django-tasks-db has no heartbeat (`heartbeats = False`): nothing to extend."""
        return False

    def _run_task(self, conn: Connection[Any], claim: Execution, failure: str | None) -> str:
        """`Worker.run_task` on the claimed row; return the status it left on it."""
        said = _FAILURE.set(failure)
        try:
            with _call(conn):
                _worker(claim.worker).run_task(claim.result)
        finally:
            _FAILURE.reset(said)
        return str(claim.result.status)

    def complete(self, conn: Connection[Any], claim: Execution, effect: Effect) -> bool:
        """`run_task` with a task that returns: `set_successful` saves the row by id.

        The effect is the task body, which the machine ran before (see the module
        docstring): it is not called here.
        """
        return bool(self._run_task(conn, claim, None) == TaskResultStatus.SUCCESSFUL)

    def fail(self, conn: Connection[Any], claim: Execution, error: str) -> bool:
        """`run_task` with a task that raises: `set_failed` saves the row by id, for good."""
        return bool(self._run_task(conn, claim, error) == TaskResultStatus.FAILED)

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        with psycopg_errors(), use_connection(conn):
            try:
                status = task_backends[DEFAULT_TASK_BACKEND_ALIAS].get_result(str(job_id)).status
            except TaskResultDoesNotExist:
                raise LookupError(f"django-tasks-db has no task result {job_id}") from None
        return STATES[status]

    def effect_key(self, claim: Execution) -> str:
        return f"django-tasks-db-{claim.job_id}"


Queue = DjangoTasksDbQueue
