"""The scenario the pgqueuer 1.6 witnesses replay, with pgqueuer's own queue managers.

Two real `pgqueuer.QueueManager`s (each on a psycopg connection of its own, through
pgqueuer's `PsycopgDriver`) run one entrypoint. Manager A picks the job and its
execution hangs. Time: this script rewrites pgqueuer's own `pgqueuer.heartbeat` column
300 s into the past, as if A's heartbeats had stopped that long (it says so when it
does); A's `Heartbeat` would next beat only after 60 s (`heartbeat_timeout / 2`), well
after the script is done. Manager B starts, and its dequeue re-picks the stale job
(pgqueuer's own re-pick clause). Then the script releases the executions in the order
the property needs, and pgqueuer's managers log them (`JobStatusLogBuffer` ->
`Queries.log_jobs`) as they do in production.

Run with `python SCRIPT DSN` on an empty database (the matrix's witness runner makes
one); nothing else runs on it.
"""

import asyncio
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from pgqueuer import PsycopgDriver, Queries, QueueManager
from pgqueuer.models import Job
from psycopg.rows import dict_row

ENTRYPOINT = "witness"
TIMEOUT = timedelta(seconds=120)
"""heartbeat_timeout for both managers: beats every 60 s, a re-pick after 120 s of silence."""
POLL = timedelta(seconds=300)
"""dequeue_timeout: a manager polls again only when notified (an insert or a delete)."""
DEADLINE = 30.0
RELEASE: dict[int, asyncio.Event] = {}
STARTED: list[str] = []


def say(step: str) -> None:
    print(step, flush=True)


async def until(what: str, ready: Callable[[], bool]) -> bool:
    """Wait (real time) until `ready()`; False after the deadline."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not ready():
        if loop.time() > end:
            say(f"  (gave up after {DEADLINE:g} s waiting for {what})")
            return False
        await asyncio.sleep(0.05)
    return True


def row(dsn: str, job_id: int, names: dict[str, str]) -> dict[str, Any]:
    """The job's queue row (None once deleted) and its log's statuses; managers by name."""
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        queued = conn.execute(
            "select status::text, queue_manager_id::text as qm,"
            " round(extract(epoch from now() - heartbeat)) as silent_s"
            " from pgqueuer where id = %s",
            [job_id],
        ).fetchone()
        log = conn.execute(
            "select status::text from pgqueuer_log where job_id = %s order by id", [job_id]
        ).fetchall()
    if queued is not None:
        queued = {**queued, "qm": names.get(queued["qm"] or "", queued["qm"])}
    return {"row": queued, "log": [r["status"] for r in log]}


def shown(seen: dict[str, Any]) -> str:
    queued = seen["row"]
    where = "no queue row (deleted)"
    if queued is not None:
        where = (
            f"status={queued['status']} queue_manager={queued['qm']} "
            f"heartbeat {queued['silent_s']} s ago"
        )
    return f"{where}; log: {seen['log']}"


def manager(conn: psycopg.AsyncConnection[Any], name: str) -> QueueManager:
    qm = QueueManager(Queries(PsycopgDriver(conn)))

    async def body(job: Job) -> None:
        n = len(STARTED) + 1
        STARTED.append(name)
        await RELEASE.setdefault(n, asyncio.Event()).wait()

    qm.entrypoint(ENTRYPOINT)(body)
    return qm


async def scenario(dsn: str, order: tuple[int, int]) -> dict[str, Any]:
    """Replay the steps, releasing executions in `order`; return what the rows showed."""
    seen: dict[str, Any] = {}
    conns = [await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(3)]
    admin, conn_a, conn_b = conns
    try:
        queries = Queries(PsycopgDriver(admin))
        await queries.install()
        (job_id,) = await queries.enqueue(ENTRYPOINT, b"{}")
        names: dict[str, str] = {}
        say(f"enqueue job {job_id} -> {shown(row(dsn, job_id, names))}")

        a = manager(conn_a, "A")
        names[str(a.queue_manager_id)] = "A"
        run_a = asyncio.create_task(
            a.run(dequeue_timeout=POLL, batch_size=1, heartbeat_timeout=TIMEOUT)
        )
        if not await until("manager A to start the job", lambda: len(STARTED) >= 1):
            return seen
        say(f"manager A picked it; execution 1 hangs -> {shown(row(dsn, job_id, names))}")

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "update pgqueuer set heartbeat = heartbeat - interval '300 seconds' where id = %s",
                [job_id],
            )
        rewound = shown(row(dsn, job_id, names))
        say(f"time: rewrote pgqueuer.heartbeat 300 s into the past -> {rewound}")

        b = manager(conn_b, "B")
        names[str(b.queue_manager_id)] = "B"
        run_b = asyncio.create_task(
            b.run(dequeue_timeout=POLL, batch_size=1, heartbeat_timeout=TIMEOUT)
        )
        if not await until("manager B to start the job", lambda: len(STARTED) >= 2):
            return seen
        seen["b_started"] = STARTED[1]
        seen["repicked"] = row(dsn, job_id, names)
        say(f"manager {STARTED[1]} re-picked it; execution 2 runs -> {shown(seen['repicked'])}")

        for n in order:
            who = STARTED[n - 1]
            RELEASE.setdefault(n, asyncio.Event()).set()
            await asyncio.sleep(1.0)  # the manager logs it through its buffer (0.1 s)
            seen[f"after_{n}"] = row(dsn, job_id, names)
            say(f"execution {n} (manager {who}) returns; then -> {shown(seen[f'after_{n}'])}")
        a.shutdown.set()
        b.shutdown.set()
        await asyncio.wait_for(asyncio.gather(run_a, run_b), DEADLINE)
    finally:
        for each in conns:
            await each.close()
    return seen


def main(judge: Callable[[dict[str, Any]], tuple[bool, str]], order: tuple[int, int]) -> int:
    """Run the scenario, print the verdict line, return the exit status."""
    seen = asyncio.run(scenario(sys.argv[1], order))
    ok, sentence = judge(seen)
    print(("WITNESSED: " if ok else "NOT REPRODUCED: ") + sentence, flush=True)
    return 0 if ok else 1
