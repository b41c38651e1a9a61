"""saq 0.26.4: a swept execution's late completion or failure lands on the job's next execution.

Usage: python repro.py DSN (or DSN=... python repro.py): a PostgreSQL URL or conninfo, or
redis://... It makes its own database (PostgreSQL) or queue name (Redis), and drops it.
Worker A, saq's Worker in a process of its own, takes a job (heartbeat=2, timeout=60);
the job's first execution blocks A's event loop in a synchronous call for 12 s. Worker B
(here, sweeping every second) re-queues the job when saq's sweep gives up on it, and runs
it. Then A's loop goes on. Twice: the late execution returns, then it raises. Exit 1 if
A's late write landed on B's execution (the bug), 0 if not. Logs shown: saq's errors.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import sys
import time
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from saq import Queue, Worker
from saq.queue.postgres import PostgresQueue

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["DSN"]
NAME = f"saq_repro_{os.getpid()}"
logging.getLogger("saq").setLevel(logging.ERROR)


def a_done(row: tuple[Any, ...]) -> bool:  # the row holds a completion written by A
    return row[0] == "complete" and str(row[3]).startswith("sent by A")


async def receipt(ctx: Any, *, fail: bool, t0: float) -> str:
    job, me = ctx["job"], ctx["worker"].id
    print(f"{time.time() - t0:5.1f}s {me}: execution starts, attempts={job.attempts}", flush=True)
    if job.attempts == 1:  # the first execution: a synchronous call blocks A's event loop
        time.sleep(12)
        if fail:
            raise TimeoutError("the gateway did not answer")
    else:
        for _ in range(8 if fail else 1):
            await asyncio.sleep(1)
            await job.update()  # its heartbeat, well within heartbeat=2
    print(f"{time.time() - t0:5.1f}s {me}: execution returns", flush=True)
    return f"sent by {me}, attempts={job.attempts}"


SETTINGS: Any = dict(functions=[receipt], concurrency=1, timers={"sweep": 1})  # A's and B's


def queue(url: str, name: str) -> Queue:
    return Queue.from_url(url, name=name) if "redis" in url else PostgresQueue(url=url, name=name)


def worker_a(url: str, name: str) -> None:  # what `python -m saq` does with these settings
    async def run() -> None:
        await (q := queue(url, name)).connect()
        await Worker(q, id="A", **SETTINGS).start()

    asyncio.run(run())


async def scenario(q: Queue, url: str, fail: bool) -> bool:
    print(f"-- A's late execution {'raises' if fail else 'returns'}")
    t0, seen, b = time.time(), list[tuple[Any, ...]](), None
    job = await q.enqueue("receipt", fail=fail, t0=t0, heartbeat=2, timeout=60, retries=3)
    assert job is not None
    (a := multiprocessing.get_context("spawn").Process(target=worker_a, args=(url, q.name))).start()
    while time.time() - t0 < 30 and not (seen and a_done(seen[-1])):
        j = await q.job(job.key)
        assert j is not None
        error = (j.error or "").strip().rsplit("\n", 1)[-1]
        row = (j.status.value, j.attempts, j.worker_id, j.result, error)
        if not seen or row != seen[-1]:
            seen.append(row)
            print(
                f"{time.time() - t0:5.1f}s row: status={row[0]} attempts={row[1]} worker={row[2]}"
                f" result={row[3]!r} error={row[4]!r}"  # sampled every 50 ms
            )
        if b is None and row[:3] == ("active", 1, "A"):  # B starts once A has the job
            b = Worker(q, id="B", **SETTINGS)
            task = asyncio.create_task(b.start())
        await asyncio.sleep(0.05)
    a.terminate()
    a.join()
    if b is not None:
        await b.stop()
        await task
    took = next((i for i, r in enumerate(seen) if r[:3] == ("active", 2, "B")), len(seen))
    if fail:  # A ran the job again while B was running it
        return any(r[0] == "active" and r[2] == "A" for r in seen[took:])
    return a_done(seen[-1]) and any(r[0] == "complete" and r[2] == "B" for r in seen)


async def main() -> None:
    url = DSN if "redis" in DSN else make_conninfo(DSN)
    if "redis" not in url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {NAME}")
        url = make_conninfo(url, dbname=NAME)
    await (q := queue(url, NAME)).connect()
    await q.sweep(lock=1)  # B's queue takes saq's sweep lock (PostgreSQL) before A starts
    try:
        bugs = [await scenario(q, url, fail) for fail in (False, True)]
    finally:
        if "redis" in url:
            await q.redis.delete(*await q.redis.keys(f"saq:*{NAME}*"))
        await q.disconnect()
        if "redis" not in url:
            with psycopg.connect(make_conninfo(url, dbname="postgres"), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE {NAME} WITH (FORCE)")
    print(f"A's late completion is the job's final state: {bugs[0]}")
    print(f"A's late failure re-queued the job B was running, and A ran it again: {bugs[1]}")
    sys.exit(1 if any(bugs) else 0)


if __name__ == "__main__":
    asyncio.run(main())
