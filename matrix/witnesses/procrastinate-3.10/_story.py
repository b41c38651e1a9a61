"""What the procrastinate 3.10 witnesses share: procrastinate's own App and JobManager.

Each step is a public `JobManager` call, the one procrastinate's `Worker` makes at that
point: `prune_stalled_workers` then `register_worker` when a worker starts
(worker.py:445-452), `fetch_job`, `update_heartbeat` (its heartbeat loop,
worker.py:481-490), `finish_job` / `retry_job` after the task ran
(`_persist_job_status`, worker.py:165-189), and the stalled-job recipe of
docs/howto/production/retry_stalled_jobs.md, verbatim: `get_stalled_jobs()` then
`retry_job(job)` on each. The schema is installed with `SchemaManager.apply_schema_async`.

Time: a worker "stands still" when this script rewrites procrastinate's own
`procrastinate_workers.last_heartbeat` into the past (it says so when it does); nothing
else moves the clock. psycopg is used only for that and to read rows.

Run with `python SCRIPT DSN` on an empty database; nothing else runs on it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from procrastinate import App, PsycopgConnector, exceptions, jobs

QUEUE = "witness"


def say(line: str) -> None:
    print(line, flush=True)


class Story:
    """One database, one procrastinate App, and named workers."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.app = App(connector=PsycopgConnector(conninfo=dsn))
        self.task = self.app.task(queue=QUEUE, name="witness.job")(_job)
        self.workers: dict[str, int] = {}

    @property
    def jm(self) -> Any:
        return self.app.job_manager

    async def open(self) -> None:
        await self.app.open_async()
        await self.app.schema_manager.apply_schema_async()
        say("install: SchemaManager.apply_schema_async() -> procrastinate's schema")

    async def close(self) -> None:
        await self.app.close_async()

    async def defer(self) -> int:
        job_id = int(await self.task.defer_async())
        say(f"defer: witness.job -> job {job_id}")
        return job_id

    async def start(self, name: str) -> int:
        """What Worker.run does first: prune stalled workers (30 s), then register."""
        pruned = await self.jm.prune_stalled_workers(30)
        worker_id = int(await self.jm.register_worker())
        self.workers[name] = worker_id
        say(
            f"worker {name} starts: prune_stalled_workers(30) -> pruned {list(pruned)}; "
            f"register_worker() -> id {worker_id}"
        )
        return worker_id

    async def fetch(self, name: str) -> jobs.Job | None:
        job = await self.jm.fetch_job(queues=[QUEUE], worker_id=self.workers[name])
        got = "nothing" if job is None else f"job {job.id} (attempts {job.attempts})"
        say(f"worker {name}: fetch_job -> {got}")
        return job  # type: ignore[no-any-return]

    async def beat(self, name: str) -> None:
        await self.jm.update_heartbeat(self.workers[name])
        say(f"worker {name}: update_heartbeat({self.workers[name]}) -> {self.worker_row(name)}")

    def stand_still(self, name: str, seconds: int) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "update procrastinate_workers set last_heartbeat = last_heartbeat - "
                "make_interval(secs => %s) where id = %s",
                [seconds, self.workers[name]],
            )
        say(
            f"time: worker {name} stands still {seconds} s (this script moves its "
            f"procrastinate_workers.last_heartbeat {seconds} s into the past)"
        )

    async def recipe(self) -> list[int]:
        """The documented periodic task, verbatim."""
        stalled = list(await self.jm.get_stalled_jobs())
        say(f"stalled-job recipe: get_stalled_jobs() -> {[j.id for j in stalled]}")
        for job in stalled:
            await self.jm.retry_job(job)
            say(f"stalled-job recipe: retry_job(job {job.id}) -> {self.job_row(job.id)}")
        return [int(j.id) for j in stalled]

    async def finish(self, name: str, job: jobs.Job, status: jobs.Status) -> bool:
        return await self._answer(
            f"worker {name}: finish_job(job {job.id}, {status.value})",
            lambda: self.jm.finish_job(job=job, status=status, delete_job=False),
            job,
        )

    async def retry(self, name: str, job: jobs.Job) -> bool:
        return await self._answer(
            f"worker {name}: retry_job(job {job.id}) after the task raised",
            lambda: self.jm.retry_job(job),
            job,
        )

    async def _answer(self, what: str, call: Callable[[], Awaitable[None]], job: jobs.Job) -> bool:
        try:
            await call()
        except exceptions.ConnectorException as exc:
            cause = exc.__cause__ or exc
            say(f"{what} -> refused: {str(cause).splitlines()[0]}; {self.job_row(job.id)}")
            return False
        say(f"{what} -> accepted; {self.job_row(job.id)}")
        return True

    def job_row(self, job_id: Any) -> str:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "select status, worker_id, attempts from procrastinate_jobs where id = %s",
                [job_id],
            ).fetchone()
        if row is None:
            return f"job {job_id}: no row"
        return f"job {job_id} is {row[0]}, worker_id {row[1]}, attempts {row[2]}"

    def worker_row(self, name: str) -> str:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "select round(extract(epoch from now() - last_heartbeat)) "
                "from procrastinate_workers where id = %s",
                [self.workers[name]],
            ).fetchone()
        if row is None:
            return f"procrastinate_workers has no row {self.workers[name]}"
        return f"last_heartbeat {row[0]} s ago"


async def _job() -> None:
    """The task; its body never runs here (the script plays the worker's calls)."""


def finish(witnessed: bool, sentence: str) -> int:
    say(("WITNESSED: " if witnessed else "NOT REPRODUCED: ") + sentence)
    return 0 if witnessed else 1


def dsn() -> str:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python SCRIPT DSN")
    return sys.argv[1]


class NotThere(Exception):
    """The replay did not get as far as the witness needs; the message says why."""


async def recovered(s: Story, bystanders: tuple[str, ...] = ()) -> tuple[int, Any, Any]:
    """The start three witnesses share: worker w0 fetches a job and stands still 60 s,
    the stalled-job recipe re-queues it, and worker w1 fetches it (`bystanders`, started
    and heartbeating meanwhile, are there to fetch it later).

    Returns the job's id, w0's (stale) job and w1's (current) one.
    """
    job_id = await s.defer()
    for name in ("w0", "w1", *bystanders):
        await s.start(name)
    stale = await s.fetch("w0")
    if stale is None or stale.id != job_id:
        raise NotThere("w0 did not fetch the job")
    s.stand_still("w0", 60)
    for name in ("w1", *bystanders):
        await s.beat(name)
    if job_id not in await s.recipe():
        raise NotThere("the recipe did not find w0's job stalled")
    owner = await s.fetch("w1")
    if owner is None or owner.id != job_id:
        raise NotThere("w1 did not fetch the recovered job")
    return job_id, stale, owner


def run(steps: Callable[[Story], Awaitable[int]]) -> int:
    """Play `steps` on the script's database (its one argument); return the exit status."""

    async def play() -> int:
        s = Story(dsn())
        await s.open()
        try:
            return await steps(s)
        except NotThere as why:
            return finish(False, str(why))
        finally:
            await s.close()

    return asyncio.run(play())
