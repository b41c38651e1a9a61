"""The scenario both chancy 0.25.1 witnesses replay, with chancy's own workers.

Two real `chancy.Worker`s (chancy's async executor, its own update loop) share one
queue of concurrency 1. Worker A fetches the job and its execution hangs; A's
heartbeats stop (time: this script rewrites chancy's own `chancy_workers.last_seen`
60 s into the past, as if A had been silent that long; it says so when it does). The
leader's `Recovery.recover` (the Recovery plugin's own query) puts the job back, and
worker B fetches and runs it. Then A's execution finishes, and chancy's update loop
writes A's result.

Run with `python SCRIPT DSN` on an empty database (the matrix's witness runner makes
one); nothing else runs on it.
"""

import asyncio
import datetime
import sys
from collections.abc import Callable
from typing import Any

import psycopg
from chancy import Chancy, Job, Queue, QueuedJob, Worker
from chancy.plugin import Plugin
from chancy.plugins.recovery import Recovery
from psycopg.rows import dict_row

QUEUE = "witness"
RELEASE: dict[int, asyncio.Event] = {}
STARTED: list[int] = []
FAIL: set[int] = set()
DEADLINE = 30.0


async def job_body() -> None:
    """The task: execution n waits until the script releases it, then returns or raises."""
    n = len(STARTED) + 1
    STARTED.append(n)
    await RELEASE.setdefault(n, asyncio.Event()).wait()
    if n in FAIL:
        raise RuntimeError(f"execution {n} failed (the witness asked it to)")


class Written(Plugin):  # type: ignore[misc]  # chancy ships no types
    """Records every update chancy reports written (`Plugin.on_job_updated`)."""

    def __init__(self) -> None:
        super().__init__()
        self.by: list[tuple[str, str]] = []

    @staticmethod
    def get_identifier() -> str:
        return "witness.written"

    async def on_job_updated(self, *, worker: Worker, job: QueuedJob) -> None:
        self.by.append((worker.worker_id, job.state.value))


def say(step: str) -> None:
    print(step, flush=True)


async def until(what: str, ready: Callable[[], bool]) -> bool:
    """Wait (real time, chancy's own polling) until `ready()`; False after the deadline."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not ready():
        if loop.time() > end:
            say(f"  (gave up after {DEADLINE:g} s waiting for {what})")
            return False
        await asyncio.sleep(0.05)
    return True


def row(dsn: str, job_id: Any) -> dict[str, Any]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        found = conn.execute(
            "select state, taken_by, attempts, max_attempts, completed_at"
            " from chancy_jobs where id = %s",
            [job_id],
        ).fetchone()
    assert found is not None
    return dict(found)


def announced(dsn: str, worker_id: str) -> bool:
    """Whether chancy has the worker's heartbeat row yet (its first announcement)."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "select 1 from chancy_workers where worker_id = %s", [worker_id]
        ).fetchone()
    return found is not None


async def silence(dsn: str, worker_id: str) -> bool:
    """Make the worker look silent for 60 s: rewrite chancy's own `last_seen`.

    Waits for the worker's first announcement (its heartbeat task runs beside its
    first fetch), so the rewrite cannot come before the row it rewrites.
    """
    if not await until(f"{worker_id}'s first heartbeat", lambda: announced(dsn, worker_id)):
        return False
    with psycopg.connect(dsn) as conn:
        done = conn.execute(
            "update chancy_workers set last_seen = last_seen - interval '60 seconds'"
            " where worker_id = %s",
            [worker_id],
        )
        rewritten = done.rowcount == 1
    say(f"time: rewrote chancy_workers.last_seen of {worker_id} 60 s into the past")
    return rewritten


def shown(r: dict[str, Any]) -> str:
    done = r["completed_at"]
    at = done.astimezone(datetime.UTC).strftime("%H:%M:%S.%f") if done else None
    return (
        f"state={r['state']} taken_by={r['taken_by']} attempts={r['attempts']} "
        f"max_attempts={r['max_attempts']} completed_at={at}"
    )


def worker(app: Chancy, name: str) -> Worker:
    # heartbeat_poll_interval: A announces once, at start; its silence is then written.
    return Worker(
        app,
        worker_id=name,
        heartbeat_timeout=30,
        heartbeat_poll_interval=3600,
        register_signal_handlers=False,
    )


async def scenario(dsn: str, b_waits: bool, b_fails: bool = False) -> dict[str, Any]:
    """Replay the steps; return what the row and chancy's update hooks showed.

    `b_waits`: B's execution ends only after A's late update; `b_fails`: it then raises.
    """
    written = Written()
    app = Chancy(dsn, plugins=[written], no_default_plugins=True)
    seen: dict[str, Any] = {"written": written.by}
    async with app:
        await app.migrate()
        await app.declare(
            Queue(QUEUE, concurrency=1, executor=Chancy.Executor.Async, polling_interval=1)
        )
        ref = await app.push(Job(func=f"{__name__}.job_body", queue=QUEUE, max_attempts=3))
        job_id = ref.identifier
        say(f"push job {job_id} (max_attempts=3) -> {shown(row(dsn, job_id))}")

        a = worker(app, "worker-a")
        await a.start()
        if not await until("worker A to start the job", lambda: len(STARTED) >= 1):
            return seen
        say(f"worker A fetched it; its execution 1 hangs -> {shown(row(dsn, job_id))}")

        if not await silence(dsn, "worker-a"):
            return seen

        leader = worker(app, "leader")
        async with app.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            recovered = await Recovery.recover(leader, app, cur)
        seen["recovered"] = row(dsn, job_id)
        say(f"leader: Recovery.recover -> {recovered} row(s); {shown(seen['recovered'])}")

        b = worker(app, "worker-b")
        if not b_waits:
            RELEASE.setdefault(2, asyncio.Event()).set()
        await b.start()
        if not await until("worker B to start the job", lambda: len(STARTED) >= 2):
            return seen
        seen["b_running"] = row(dsn, job_id)
        say(f"worker B started; execution 2 of the job started -> {shown(seen['b_running'])}")
        if not b_waits:
            await until("B's update", lambda: ("worker-b", "succeeded") in written.by)
            seen["after_b"] = row(dsn, job_id)
            say(f"execution 2 returned; its update -> {shown(seen['after_b'])}")

        RELEASE.setdefault(1, asyncio.Event()).set()
        await until("A's update", lambda: any(w == "worker-a" for w, _ in written.by))
        await asyncio.sleep(1.5)  # one more pass of chancy's 1 s update loop
        seen["after_a"] = row(dsn, job_id)
        say(f"execution 1 (worker A) released; then -> {shown(seen['after_a'])}")
        if b_waits:
            if b_fails:
                FAIL.add(2)
            RELEASE.setdefault(2, asyncio.Event()).set()
            await until("B's update", lambda: any(w == "worker-b" for w, _ in written.by))
            seen["b_wrote"] = next((st for w, st in written.by if w == "worker-b"), None)
            await asyncio.sleep(1.5)
            seen["after_b"] = row(dsn, job_id)
            ended = "raised" if b_fails else "returned"
            say(f"execution 2 (worker B) {ended}; chancy wrote state={seen['b_wrote']}")
            say(f"  then -> {shown(seen['after_b'])}")
        say(f"updates chancy reported written (on_job_updated, worker and state): {written.by}")
        for n in range(3, 6):  # a job written retrying may run again: let it end
            RELEASE.setdefault(n, asyncio.Event()).set()
        await a.stop()
        await b.stop()
    return seen


def main(
    judge: Callable[[dict[str, Any]], tuple[bool, str]], b_waits: bool, b_fails: bool = False
) -> int:
    """Run the scenario, print the verdict line, return the exit status."""
    seen = asyncio.run(scenario(sys.argv[1], b_waits, b_fails))
    ok, sentence = judge(seen)
    print(("WITNESSED: " if ok else "NOT REPRODUCED: ") + sentence, flush=True)
    return 0 if ok else 1
