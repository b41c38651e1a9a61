"""What the oban witnesses share: oban's own schema, worker, executor and queries.

Each step is what oban's runtime does at that point, through the same code: the
`Producer` fetches with `Query.fetch_jobs` (`_producer.py`, `_get_jobs`), runs the job
with `Executor(job, safe=True).execute()` and acks the executor's decision with
`Query.ack_jobs` (`_producer.py`, `_execute` and `_ack_jobs`); the leader's `Lifeline`
runs `Query.rescue_jobs(rescue_after)` (`_lifeline.py`, `_rescue`); the `Stager` runs
`Query.stage_jobs` (`_stager.py`). Those methods run oban's installed SQL
(`oban/queries/*.sql`). Jobs are enqueued with the public `Oban.enqueue` and a worker
declared with the public `@worker` decorator; the schema is installed with
`oban.schema.install`. The script holds each fetched `Job` as the producer does and
decides whether its run raises.

Time: an execution "has run 31 s" when this script moves the job's own
`oban_jobs.attempted_at` 31 s into the past (it says so when it does); the Lifeline's
`rescue_after` is 30 s. Before 0.7.0 the ack does not read `attempted_at`
(`ack_job.sql`), so the rewrite changes nothing the ack compares.

Run with `python SCRIPT DSN` on an empty database; nothing else runs on it.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

import psycopg
from oban import Oban, schema, worker
from oban._executor import Executor
from oban._query import Query
from oban.job import Job
from psycopg_pool import AsyncConnectionPool

QUEUE = "witness"
RESCUE_AFTER = 30.0
VERSION = version("oban")
RAISE: set[int] = set()
"""Attempts whose run raises (the script decides, per execution)."""


def say(line: str) -> None:
    print(line, flush=True)


@worker(queue=QUEUE)
class WitnessWorker:
    """The job's body: it raises when the script says this attempt fails."""

    async def process(self, job: Job) -> None:
        if job.attempt in RAISE:
            raise RuntimeError(f"attempt {job.attempt} failed")

    def backoff(self, job: Job) -> int:
        return 0


class Story:
    """One database, oban's queries on a pool of its own, and named producers."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.pool = AsyncConnectionPool(dsn, open=False, min_size=1, max_size=4)
        self.query: Any = None
        self.oban: Any = None

    async def open(self) -> None:
        await self.pool.open()
        await schema.install(self.pool)
        self.query = Query(self.pool)
        self.oban = Oban(pool=self.pool)
        say(f"install: oban {VERSION}, oban.schema.install(pool)")

    async def close(self) -> None:
        await self.pool.close()

    async def enqueue(self, max_attempts: int = 20) -> int:
        job = await self.oban.enqueue(WitnessWorker.new({}, max_attempts=max_attempts))
        say(f"enqueue: Oban.enqueue -> job {job.id} (max_attempts {max_attempts})")
        return int(job.id)

    async def fetch(self, node: str) -> Job | None:
        producer = str(uuid.uuid5(uuid.NAMESPACE_DNS, node))
        fetched = await self.query.fetch_jobs(demand=1, queue=QUEUE, node=node, uuid=producer)
        if not fetched:
            say(f"producer {node}: fetch_jobs -> nothing")
            return None
        job: Job = fetched[0]
        say(f"producer {node}: fetch_jobs -> job {job.id} attempt {job.attempt}")
        return job

    async def fetch_raising(self, node: str) -> BaseException | None:
        """Fetch, and return the error oban's fetch raised (None if it did not)."""
        try:
            await self.fetch(node)
        except psycopg.Error as exc:
            say(f"producer {node}: fetch_jobs -> raised {type(exc).__name__}: {_first(exc)}")
            return exc
        return None

    def has_run(self, job_id: int, seconds: int = 31) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "update oban_jobs set attempted_at = attempted_at - make_interval(secs => %s) "
                "where id = %s",
                [seconds, job_id],
            )
        say(
            f"time: job {job_id}'s execution has run {seconds} s (this script moves its "
            f"oban_jobs.attempted_at {seconds} s into the past)"
        )

    async def lifeline(self) -> int:
        rescued = int(await self.query.rescue_jobs(RESCUE_AFTER))
        say(f"Lifeline: rescue_jobs(rescue_after={RESCUE_AFTER:g}) -> {rescued} rescued")
        return rescued

    async def stage(self) -> None:
        staged = await self.query.stage_jobs(limit=1000, queues=[QUEUE])
        say(f"Stager: stage_jobs -> {staged}")

    async def run_and_ack(self, node: str, job: Job, *, raises: bool = False) -> bool:
        """The producer runs the job with oban's Executor and acks its decision."""
        if raises:
            RAISE.add(job.attempt)
        else:
            RAISE.discard(job.attempt)
        executor = await Executor(job=job, safe=True).execute()
        action = executor.action
        acked = await self.query.ack_jobs([action])
        matched = job.id in acked
        say(
            f"producer {node}: job {job.id} attempt {job.attempt} "
            f"{'raised' if raises else 'returned'}; ack_jobs({action.state}) -> "
            f"{'matched' if matched else 'matched nothing'}; {self.row(job.id)}"
        )
        return matched

    def row(self, job_id: Any) -> str:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "select state::text, attempt, max_attempts, completed_at from oban_jobs "
                "where id = %s",
                [job_id],
            ).fetchone()
        if row is None:
            return f"job {job_id}: no row"
        done = f", completed_at {row[3]:%H:%M:%S.%f}" if row[3] else ""
        return f"job {job_id} is {row[0]}, attempt {row[1]}/{row[2]}{done}"

    def completed_at(self, job_id: int) -> Any:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("select completed_at from oban_jobs where id = %s", [job_id])
            found = row.fetchone()
        return None if found is None else found[0]


def _first(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def finish(witnessed: bool, sentence: str) -> int:
    say(("WITNESSED: " if witnessed else "NOT REPRODUCED: ") + sentence)
    return 0 if witnessed else 1


def dsn() -> str:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python SCRIPT DSN")
    return sys.argv[1]


class NotThere(Exception):
    """The replay did not get as far as the witness needs; the message says why."""


async def rescued(s: Story, max_attempts: int = 20) -> tuple[int, Job, Job]:
    """The start every oban witness shares: producer w0 fetches a job and runs past the
    lease, the Lifeline rescues it, and producer w1 fetches it.

    Returns the job's id, w0's (stale) execution and w1's (current) one.
    """
    job_id = await s.enqueue(max_attempts=max_attempts)
    stale = await s.fetch("w0")
    if stale is None:
        raise NotThere("w0 fetched nothing")
    s.has_run(job_id)
    await s.lifeline()
    owner = await s.fetch("w1")
    if owner is None or owner.id != job_id:
        raise NotThere("w1 did not fetch the rescued job")
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


async def fencing(s: Story) -> int:
    """A rescued execution's late failure is acked while w1 runs the job."""
    job_id, stale, owner = await rescued(s)
    say("w0's run ends while w1 is running the job: it raised")
    if not await s.run_and_ack("w0", stale, raises=True):
        return finish(False, "w0's late ack matched nothing")
    return finish(
        True,
        f"after the Lifeline rescued job {job_id} and producer w1 fetched it (attempt "
        f"{owner.attempt}), the rescued execution's late failure (attempt "
        f"{stale.attempt}) was acked and made the job retryable while w1 was still "
        "running it",
    )


async def exclusive_lease(s: Story) -> int:
    """That acked failure makes the job due again: it is fetched beside w1's execution."""
    job_id, stale, owner = await rescued(s)
    say("w0's run ends: it raised (its retry is due at once)")
    await s.run_and_ack("w0", stale, raises=True)
    await s.stage()
    again = await s.fetch("w0")
    if again is None or again.id != job_id:
        return finish(False, "the job was not fetched again while w1 runs it")
    return finish(
        True,
        f"while producer w1 was running job {job_id} (attempt {owner.attempt}, "
        "fetched 0 s before), the rescued execution's late failure was acked and the "
        f"job was fetched again (attempt {again.attempt}): two executions at once",
    )
