"""no-lost-jobs, django-tasks-db 0.13.0: a task whose db_worker died stays RUNNING for good.

Replays matrix/results/counterexamples/django-tasks-db-0.13.0/no-lost-jobs.txt: a
worker claims job1 and crashes while it holds it; the workers that follow, and the
drain, find nothing to claim, and after the drain django-tasks-db still shows job1
running. Here with django-tasks-db's own `db_worker` processes (`python -m django
db_worker`, the project in `_settings.py`, its tasks in `_tasks.py`) on Django's own
PostgreSQL backend: `manage.py migrate` installs the schema; task A is enqueued with
the public API (`hang.enqueue(...)`); worker-1 claims it and starts running it, and is
killed with SIGKILL mid-task. Then `db_worker --batch` (run until nothing is ready,
then exit) starts twice: under the same `--worker-id worker-1` (a restart, with a
task B to show the worker runs) and as worker-2. Both exit with nothing left to run;
task A is RUNNING, and the backend's `get_result` says so. Time: the script rewrites
django-tasks-db's own `started_at` of task A 24 h into the past before the restart
(it says so), to show that no age hands a task out again; psycopg is used only for
that and to read rows.

Why a bug, not a design: `db_worker` claims only `READY` rows
(`DBTaskResultQuerySet.ready`, django_tasks_db/models.py:109-117, taken by
`Worker.run`, management/commands/db_worker.py:110-123) and `claim()` sets them
`RUNNING` (models.py:256-263); only `run_task`'s `set_successful` / `set_failed`
(db_worker.py:163-205, models.py:265-299) ever move a row on, and they run in the
process that claimed it. No code in the package sets a row back to `READY`, looks at
`started_at`, or fails the running tasks of a worker that is gone, so a task whose
worker died (OOM, SIGKILL, a lost host) is neither run nor reported failed, ever. Its
maintainer files this as a bug, open since 2024-06-11: "Unclean exits of the worker
leave tasks in limbo ... the task remains marked as "PROCESSING", and thus is never
picked up for re-processing nor marked as completed / failed"
(https://github.com/RealOrangeOne/django-tasks-db/issues/5, label bug; first filed as
https://github.com/RealOrangeOne/django-tasks/issues/46), with a start-up fix by worker
id proposed there and not released: the restart under the same id below shows that.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
TABLE = "django_tasks_database_dbtaskresult"
TIMEOUT = 60.0


def say(line: str) -> None:
    print(line, flush=True)


def finish(witnessed: bool, sentence: str) -> int:
    say(f"{'WITNESSED' if witnessed else 'NOT REPRODUCED'}: {sentence}")
    return 0 if witnessed else 1


def manage(*args: str, log: Path) -> subprocess.Popen[bytes]:
    """Start `python -m django ARGS` for the witness project, output to `log`."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "_settings", "PYTHONPATH": str(HERE)}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "django", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def worker(name: str, *flags: str, log: Path) -> subprocess.Popen[bytes]:
    return manage(
        "db_worker", "--worker-id", name, "--no-startup-delay", "--interval", "0.1", *flags, log=log
    )


def row(conn: psycopg.Connection[Any], task_id: str) -> str:
    found = conn.execute(
        f"select status, worker_ids, finished_at is not null from {TABLE} where id = %s",
        [task_id],
    ).fetchone()
    if found is None:
        return "no row"
    status, worker_ids, finished = found
    return f"status={status} worker_ids={worker_ids} finished={'yes' if finished else 'no'}"


def wait_for(what: str, done: Any) -> bool:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    say(f"gave up waiting {TIMEOUT:g} s for {what}")
    return False


def main(dsn: str) -> int:
    os.environ["WITNESS_DSN"] = dsn
    work = Path(tempfile.mkdtemp(prefix="django-tasks-db-witness-"))
    log = work / "workers.log"
    migrate = manage("migrate", "--verbosity", "0", log=log)
    if migrate.wait(timeout=TIMEOUT) != 0:
        return finish(False, f"manage.py migrate failed (see {log})")
    say("install: manage.py migrate -> django-tasks-db's schema")

    sys.path.insert(0, str(HERE))
    os.environ["DJANGO_SETTINGS_MODULE"] = "_settings"
    import django

    django.setup()
    from _tasks import hang, quick
    from django_tasks import default_task_backend

    marker = work / "task-a-started"
    task_a = hang.enqueue(str(marker)).id
    with psycopg.connect(dsn, autocommit=True) as conn:
        say(f"enqueue task A (hang) -> {row(conn, task_a)}")

        first = worker("worker-1", log=log)
        if not wait_for("worker-1 to start task A", marker.exists):
            first.kill()
            return finish(False, "worker-1 never started task A")
        say(f"db_worker --worker-id worker-1 claimed task A and runs it -> {row(conn, task_a)}")
        os.killpg(first.pid, signal.SIGKILL)
        code = first.wait(timeout=TIMEOUT)
        say(f"kill -9 worker-1 while task A runs -> exit status {code}")

        conn.execute(
            f"update {TABLE} set started_at = started_at - interval '24 hours' where id = %s",
            [task_a],
        )
        say("time: rewrote task A's started_at (django-tasks-db's own) 24 h into the past")

        task_b = quick.enqueue().id
        say(f"enqueue task B (quick) -> {row(conn, task_b)}")
        for name in ("worker-1", "worker-2"):
            batch = worker(name, "--batch", log=log)
            code = batch.wait(timeout=TIMEOUT)
            say(
                f"db_worker --worker-id {name} --batch (run until nothing is ready) -> exit "
                f"status {code}; task A: {row(conn, task_a)}; task B: {row(conn, task_b)}"
            )
            if code != 0:
                return finish(False, f"db_worker --batch as {name} exited {code} (see {log})")

        status = default_task_backend.get_result(task_a).status
        say(f"default_task_backend.get_result(task A).status -> {status}")
        ran_b = row(conn, task_b).startswith("status=SUCCESSFUL")
        still = row(conn, task_a) == "status=RUNNING worker_ids=['worker-1'] finished=no"
    if not ran_b:
        return finish(False, f"the restarted workers did not run task B (see {log})")
    if not still or status != "RUNNING":
        return finish(False, f"task A was picked up again or finished ({status}; see {log})")
    shutil.rmtree(work)
    return finish(
        True,
        "task A, whose db_worker was killed (SIGKILL) while running it, stays RUNNING with "
        "worker_ids ['worker-1'], 24 h after it started: a worker restarted under the same "
        "--worker-id and another worker each ran until nothing was ready (task B ran) and "
        "exited, and django-tasks-db 0.13.0 never hands task A out again nor marks it failed",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
