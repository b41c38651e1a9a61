"""The witnesses' story: a cluster whose delivery ran out finishes it while another runs it.

Two django-q2 `qcluster` processes (`python -m django qcluster`, the project in
`_settings.py`, one worker each, `retry` 4 s) on one ORM broker. Cluster A takes task
T and runs it to its end; its monitor's `save_task` then waits on a row lock (the
witness's transaction holds one saved success `FOR UPDATE`, as any transaction on the
result table may: `save_task` locks every saved success before it writes,
django_q/monitor.py:112-119), and A is frozen (SIGSTOP of its process group, so its
pusher cannot take T back). T's `lock` runs out (`retry`), cluster B dequeues T and
starts running it. Then A is thawed and the lock released: A's monitor saves its
result and acknowledges, while B is still running T. The witness reads only
django-q2's tables (`django_q_ormq`, `django_q_task`) and its public `fetch()`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
TIMEOUT = 60.0


def say(line: str) -> None:
    print(line, flush=True)


def finish(witnessed: bool, sentence: str) -> int:
    say(f"{'WITNESSED' if witnessed else 'NOT REPRODUCED'}: {sentence}")
    return 0 if witnessed else 1


def wait_for(what: str, done: Callable[[], Any], timeout: float = TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.02)
    say(f"gave up waiting {timeout:g} s for {what}")
    return False


@dataclass
class Story:
    """What the witness saw, for each property's script to judge."""

    task_id: str = ""
    row_gone_while_b_ran: bool = False
    saved_while_b_ran: str = ""
    final: str = ""
    final_success: bool | None = None
    final_attempts: int = 0
    b_result_kept: bool = False
    notes: list[str] = field(default_factory=list)


class Project:
    """The witness project: `manage.py` commands and clusters, their logs in `work`."""

    def __init__(self, dsn: str, max_attempts: int) -> None:
        self.dsn = dsn
        self.work = Path(tempfile.mkdtemp(prefix="django-q2-witness-"))
        self.env = {
            **os.environ,
            "WITNESS_DSN": dsn,
            "WITNESS_MAX_ATTEMPTS": str(max_attempts),
            "DJANGO_SETTINGS_MODULE": "_settings",
            "PYTHONPATH": str(HERE),
        }
        self.clusters: dict[str, subprocess.Popen[bytes]] = {}

    def log(self, name: str) -> Path:
        return self.work / f"{name}.log"

    def manage(self, name: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
        with self.log(name).open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "django", *args],
                env={**self.env, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def cluster(self, name: str) -> None:
        self.clusters[name] = self.manage(name, "qcluster", WITNESS_CLUSTER=name)

    def signal(self, name: str, sig: signal.Signals) -> None:
        os.killpg(self.clusters[name].pid, sig)

    def stop(self) -> None:
        for proc in self.clusters.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.clusters.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def queue_row(conn: psycopg.Connection[Any]) -> str:
    rows = conn.execute("select id, lock from django_q_ormq order by id").fetchall()
    if not rows:
        return "no queue row"
    return "; ".join(f"queue row {i}, lock {lock:%H:%M:%S.%f}" for i, lock in rows)


def run(dsn: str, fail: bool, max_attempts: int) -> Story | None:
    """Play the story with task T raising (`fail`) or returning; None if it could not."""
    p = Project(dsn, max_attempts)
    migrate = p.manage("migrate", "migrate", "--verbosity", "0")
    if migrate.wait(timeout=TIMEOUT) != 0:
        say(f"manage.py migrate failed (see {p.log('migrate')})")
        return None
    say(f"install: manage.py migrate -> django-q2's schema; Q_CLUSTER max_attempts={max_attempts}")
    sys.path.insert(0, str(HERE))
    os.environ.update({k: p.env[k] for k in ("WITNESS_DSN", "WITNESS_MAX_ATTEMPTS")})
    os.environ["DJANGO_SETTINGS_MODULE"] = "_settings"
    import django

    django.setup()
    from django_q.tasks import async_task, fetch

    story = Story()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            p.cluster("A")
            warm_dir = p.work / "warm"
            warm_dir.mkdir()
            warm = async_task("_tasks.work", str(warm_dir), 0)
            if not wait_for("cluster A to run a first task", lambda: fetch(warm) is not None):
                return None
            say(f"qcluster A runs a first task; its saved result: success={fetch(warm).success}")

            holder = psycopg.connect(dsn)
            holder.execute("select 1 from django_q_task where id = %s for update", [warm])
            say("another transaction locks that saved success row (select ... for update)")

            t_dir = p.work / "T"
            t_dir.mkdir()
            task_id = story.task_id = async_task("_tasks.work", str(t_dir), 1.5, fail)
            say(
                f"async_task T ({'raises' if fail else 'returns'} after 1.5 s) -> {queue_row(conn)}"
            )
            if not wait_for("A to run T", lambda: (t_dir / "A.ended").exists()):
                return None
            say(f"qcluster A dequeued T and ran it to its end -> {queue_row(conn)}")
            waiting = lambda: conn.execute(  # noqa: E731
                "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                "and query ilike '%django_q_task%for update%'"
            ).fetchone()[0]
            if not wait_for("A's monitor to wait in save_task", lambda: waiting() > 0):
                return None
            say("A's monitor: save_task waits on the row lock (its select_for_update)")
            p.signal("A", signal.SIGSTOP)
            say("SIGSTOP qcluster A (all its processes)")
            expired = lambda: conn.execute(  # noqa: E731
                "select count(*) from django_q_ormq where lock < now()"
            ).fetchone()[0]
            if not wait_for("T's lock to run out", lambda: expired() > 0):
                return None
            say(f"T's delivery ran out (retry 4 s) -> {queue_row(conn)}")
            p.cluster("B")
            if not wait_for("B to start T", lambda: (t_dir / "B.started").exists()):
                return None
            say(f"qcluster B dequeued T and runs it -> {queue_row(conn)}")

            p.signal("A", signal.SIGCONT)
            holder.commit()
            holder.close()
            say("SIGCONT qcluster A; the other transaction commits (the row lock is gone)")
            if not wait_for("A's result", lambda: fetch(task_id) is not None):
                return None
            if not fail:
                wait_for("A's acknowledgement", lambda: "no queue row" in queue_row(conn), 5)
            else:
                time.sleep(0.3)
            b_running = not (t_dir / "B.ended").exists()
            saved = fetch(task_id)
            story.saved_while_b_ran = (
                f"success={saved.success}, attempt_count={saved.attempt_count}, "
                f"result={str(saved.result).splitlines()[0][:60]!r}"
            )
            story.row_gone_while_b_ran = b_running and "no queue row" in queue_row(conn)
            say(
                f"A's monitor saved T ({story.saved_while_b_ran}) -> {queue_row(conn)}; "
                f"B {'is still running T' if b_running else 'had already finished T'}"
            )
            if not wait_for("B to end T", lambda: (t_dir / "B.ended").exists()):
                return None
            word = "Failed" if fail else "Processed"
            if not wait_for("B's monitor", lambda: word in p.log("B").read_text()):
                return None
            time.sleep(0.3)
            last = fetch(task_id)
            story.final_success = bool(last.success)
            story.final_attempts = int(last.attempt_count)
            story.final = (
                f"success={last.success}, attempt_count={last.attempt_count}, "
                f"result={str(last.result).splitlines()[0][:60]!r}"
            )
            story.b_result_kept = "cluster B" in str(last.result)
            say(
                f"B ended T and its monitor logged {word!r}; fetch(T) -> {story.final}; "
                f"{queue_row(conn)}"
            )
    finally:
        p.stop()
    return story
