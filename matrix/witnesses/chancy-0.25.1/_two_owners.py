"""The start the chancy 0.25.1 witnesses of a re-run job share, with chancy's own workers.

Two real `chancy.Worker`s (chancy's async executor, its own update loop, polling a
queue of concurrency 1 each) and one job (max_attempts=3). Worker A fetches it and
its execution 1 hangs; A's heartbeats stop (time: this script rewrites chancy's own
`chancy_workers.last_seen` of worker-a 60 s into the past, and says so). The leader's
`Recovery.recover` (the Recovery plugin's own query) puts the job back, and worker B
fetches it: execution 2 hangs too. From there each witness plays its own steps with a
`Run`: end execution n (return or raise) and wait until chancy reports its update
written, or wait until a worker fetches the job again. Every wait is for something
chancy shows (a row, an `on_job_updated` call, a started execution), never for luck.

Run with `python SCRIPT DSN` on an empty database (the matrix's witness runner makes
one); nothing else runs on it.
"""

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from _stale_worker import (
    FAIL,
    QUEUE,
    RELEASE,
    STARTED,
    Written,
    row,
    say,
    shown,
    silence,
    until,
    worker,
)
from chancy import Chancy, Job, Queue
from chancy.plugins.recovery import Recovery
from psycopg.rows import dict_row


class Run:
    """The job, chancy's reported updates, and the steps a witness takes from here."""

    def __init__(self, dsn: str, job_id: Any, written: Written) -> None:
        self.dsn, self.job_id, self.written = dsn, job_id, written

    def row(self) -> dict[str, Any]:
        return row(self.dsn, self.job_id)

    def last_seen_age(self, worker_id: str) -> float:
        """Seconds since chancy last recorded the worker's heartbeat (its own row)."""
        with psycopg.connect(self.dsn) as conn:
            found = conn.execute(
                "select extract(epoch from now() - last_seen) from chancy_workers"
                " where worker_id = %s",
                [worker_id],
            ).fetchone()
        assert found is not None
        return float(found[0])

    async def finish(self, n: int, *, fail: bool) -> tuple[str, dict[str, Any]] | None:
        """End execution n (raise if `fail`); once chancy reports its update written,
        return the state chancy wrote (`on_job_updated`) and the row as read just after.

        The row may already be past that state: a free worker polls the queue every
        second, so a job written `retrying` can be fetched again before the read.
        """
        before = len(self.written.by)
        if fail:
            FAIL.add(n)
        RELEASE.setdefault(n, asyncio.Event()).set()
        what = f"execution {n}'s update"
        if not await until(what, lambda: len(self.written.by) > before):
            return None
        return self.written.by[before][1], self.row()

    async def fetched_again(self, n: int) -> dict[str, Any] | None:
        """Wait until some worker starts execution n of the job; return the row then."""
        if not await until(f"execution {n} to start", lambda: len(STARTED) >= n):
            return None
        return self.row()


Steps = Callable[[Run], Awaitable[tuple[bool, str]]]


async def scenario(dsn: str, steps: Steps) -> tuple[bool, str]:
    """Bring the job to two owners (A recovered, B fetched), then play `steps`."""
    written = Written()
    app = Chancy(dsn, plugins=[written], no_default_plugins=True)
    async with app:
        await app.migrate()
        await app.declare(
            Queue(QUEUE, concurrency=1, executor=Chancy.Executor.Async, polling_interval=1)
        )
        ref = await app.push(Job(func="_stale_worker.job_body", queue=QUEUE, max_attempts=3))
        run = Run(dsn, ref.identifier, written)
        say(f"push job {ref.identifier} (max_attempts=3) -> {shown(run.row())}")

        a, b = worker(app, "worker-a"), worker(app, "worker-b")
        try:
            await a.start()
            if not await until("worker A to start the job", lambda: len(STARTED) >= 1):
                return False, "worker A never started the job"
            say(f"worker A fetched it; its execution 1 hangs -> {shown(run.row())}")

            if not await silence(dsn, "worker-a"):
                return False, "chancy never recorded worker A's heartbeat, so it could not age"

            leader = worker(app, "leader")
            async with app.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                recovered = await Recovery.recover(leader, app, cur)
            say(f"leader: Recovery.recover -> {recovered} row(s); {shown(run.row())}")

            await b.start()
            if not await until("worker B to start the job", lambda: len(STARTED) >= 2):
                return False, "worker B never started the recovered job"
            say(f"worker B fetched it; its execution 2 hangs -> {shown(run.row())}")

            verdict = await steps(run)
            say(f"updates chancy reported written (on_job_updated, worker and state): {written.by}")
            return verdict
        finally:
            for n in range(1, len(STARTED) + 3):
                RELEASE.setdefault(n, asyncio.Event()).set()
            await a.stop()
            await b.stop()


def main(steps: Steps) -> int:
    """Run the scenario and the witness's steps; print the verdict line, return the status."""
    ok, sentence = asyncio.run(scenario(sys.argv[1], steps))
    print(("WITNESSED: " if ok else "NOT REPRODUCED: ") + sentence, flush=True)
    return 0 if ok else 1
