"""The scenario the pgqueuer 1.6 witnesses replay, with pgqueuer's own queue managers.

Two real `pgqueuer.QueueManager`s (each on a psycopg connection of its own, through
pgqueuer's `PsycopgDriver`; or, for the pgqueuer-1.6-asyncpg column, whose witnesses
call `use_asyncpg()` first, each on an asyncpg connection through pgqueuer's
`AsyncpgDriver`) run one entrypoint. Manager A picks the job and its
execution hangs. Time: this script rewrites pgqueuer's own `pgqueuer.heartbeat` column
300 s into the past, as if A's heartbeats had stopped that long (it says so when it
does); A's `Heartbeat` would next beat only after 60 s (`heartbeat_timeout / 2`), well
after the script is done. Manager B starts, and its dequeue re-picks the stale job
(pgqueuer's own re-pick clause). Then the script plays the steps the property needs:
it releases an execution to return or to raise (the entrypoint runs under pgqueuer's
`DatabaseRetryEntrypointExecutor`, so a raise becomes `Queries.retry_job`) or starts a
third manager C. pgqueuer's managers log results
(`JobStatusLogBuffer` -> `Queries.log_jobs`) as they do in production.

Deterministic, not timed: before the script rewrites the heartbeat and before each
step, it waits until every running manager has ended its dequeue round and sits in its
wait for a notification (`QueueManager.run` parks in `wait_for_notice_event` for up to
`dequeue_timeout`, 300 s here; the script counts those pending waits, read only). A
waiting manager dequeues again only on an INSERT, DELETE or TRUNCATE notification:
pgqueuer's change trigger is statement-level (`adapters/persistence/schema_ddl.py`,
`render_trigger`, lines 96-102: no FOR EACH ROW), so its `OLD IS DISTINCT FROM NEW`
test (`domain/schema/notify.py` line 18) never holds and an UPDATE, such as
`retry_job`'s or a dequeue's, wakes nobody. So which manager picks next does not hang
on machine load: a manager that starts picks at once, the others sleep (a worker spends
nearly all its time in that wait). The script used to wait on the wall clock instead,
and on a loaded machine B's own dequeue round ran after A's retry: B re-picked the job
and skipped it, and C found nothing.

Run with `python SCRIPT DSN` on an empty database (the matrix's witness runner makes
one); nothing else runs on it. The script's own reads and its heartbeat rewrite go
through psycopg on either driver: they are not pgqueuer's.
"""

import asyncio
import sys
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import psycopg
from pgqueuer import (
    AsyncpgDriver,
    DatabaseRetryEntrypointExecutor,
    PsycopgDriver,
    Queries,
    QueueManager,
)
from pgqueuer.executors import EntrypointExecutorParameters
from pgqueuer.models import Job
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

ENTRYPOINT = "witness"
TIMEOUT = timedelta(seconds=120)
"""heartbeat_timeout for both managers: beats every 60 s, a re-pick after 120 s of silence."""
POLL = timedelta(seconds=300)
"""dequeue_timeout: a manager polls again only when notified (an insert or a delete)."""
DEADLINE = 30.0
RELEASE: dict[int, asyncio.Event] = {}
RAISE: set[int] = set()
STARTED: list[str] = []
Step = tuple[str, ...]
"""("return", n) / ("raise", n): release execution n; ("start", "C"): a third manager."""
DRIVER = "psycopg"
"""The managers' (and the install's and enqueue's) driver: "psycopg" or "asyncpg"."""


def say(step: str) -> None:
    print(step, flush=True)


def use_asyncpg() -> None:
    """Run pgqueuer on asyncpg connections through its `AsyncpgDriver` from now on."""
    global DRIVER
    DRIVER = "asyncpg"
    say("driver: pgqueuer's AsyncpgDriver, each manager on an asyncpg connection of its own")


def asyncpg_keywords(dsn: str) -> dict[str, Any]:
    """`asyncpg.connect`'s keywords for the runner's DSN (a libpq conninfo or URL).

    libpq's `options` and `application_name` travel in the startup packet, as
    asyncpg's `server_settings` do, so they go there unchanged; the others are
    renamed where asyncpg names them otherwise (one it lacks fails loudly).
    """
    renamed = {"dbname": "database", "connect_timeout": "timeout", "sslmode": "ssl"}
    keywords: dict[str, Any] = {"server_settings": {}}
    for key, value in conninfo_to_dict(dsn).items():
        if key in ("options", "application_name"):
            keywords["server_settings"][key] = str(value)
        else:
            keywords[renamed.get(key, key)] = value
    for key, kind in (("port", int), ("timeout", float)):
        if key in keywords:
            keywords[key] = kind(keywords[key])
    return keywords


async def connect(dsn: str) -> Any:
    """A connection of its own on the selected driver's client library."""
    if DRIVER == "asyncpg":
        import asyncpg  # only the pgqueuer-1.6-asyncpg venv has it

        return await asyncpg.connect(**asyncpg_keywords(dsn))
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True)


def driver(conn: Any) -> AsyncpgDriver | PsycopgDriver:
    """pgqueuer's own driver for `conn`."""
    return AsyncpgDriver(conn) if DRIVER == "asyncpg" else PsycopgDriver(conn)


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


def more_than(n: int) -> bool:
    return len(STARTED) > n


def logged_more(dsn: str, job_id: int, n: int) -> bool:
    """pgqueuer_log holds more than `n` entries for the job."""
    return len(row(dsn, job_id, {})["log"]) > n


def waiting() -> int:
    """How many managers sit in `QueueManager.run`'s wait for a notification."""
    return sum(
        1
        for task in asyncio.all_tasks()
        if not task.done() and task.get_coro().__qualname__.endswith("suppressed_timeout")
    )


async def settled(managers: list[QueueManager]) -> bool:
    """Wait until every running manager has ended its dequeue round and waits."""
    running = sum(1 for qm in managers if not qm.shutdown.is_set())
    return await until(f"{running} managers to wait for work", lambda: waiting() >= running)


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


def manager(conn: Any, name: str) -> QueueManager:
    qm = QueueManager(Queries(driver(conn)))

    async def body(job: Job) -> None:
        n = len(STARTED) + 1
        STARTED.append(name)
        await RELEASE.setdefault(n, asyncio.Event()).wait()
        if n in RAISE:
            raise RuntimeError(f"execution {n} failed")

    def retrying(parameters: EntrypointExecutorParameters) -> DatabaseRetryEntrypointExecutor:
        return DatabaseRetryEntrypointExecutor(
            parameters=parameters, max_attempts=2, initial_delay=timedelta(0)
        )

    qm.entrypoint(ENTRYPOINT, executor_factory=retrying)(body)
    return qm


async def scenario(dsn: str, steps: list[Step]) -> dict[str, Any]:
    """Replay the steps; return what the rows showed after each."""
    seen: dict[str, Any] = {}
    conns = [await connect(dsn) for _ in range(4)]
    admin, conn_a, conn_b, conn_c = conns
    runs: list[asyncio.Task[None]] = []
    managers: list[QueueManager] = []
    names: dict[str, str] = {}

    def start(conn: Any, name: str) -> None:
        qm = manager(conn, name)
        names[str(qm.queue_manager_id)] = name
        managers.append(qm)
        runs.append(
            asyncio.create_task(
                qm.run(dequeue_timeout=POLL, batch_size=1, heartbeat_timeout=TIMEOUT)
            )
        )

    try:
        queries = Queries(driver(admin))
        await queries.install()
        (job_id,) = await queries.enqueue(ENTRYPOINT, b"{}")
        say(f"enqueue job {job_id} -> {shown(row(dsn, job_id, names))}")

        start(conn_a, "A")
        if not await until("manager A to start the job", lambda: len(STARTED) >= 1):
            return seen
        say(f"manager A picked it; execution 1 hangs -> {shown(row(dsn, job_id, names))}")
        if not await settled(managers):
            return seen

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "update pgqueuer set heartbeat = heartbeat - interval '300 seconds' where id = %s",
                [job_id],
            )
        rewound = shown(row(dsn, job_id, names))
        say(f"time: rewrote pgqueuer.heartbeat 300 s into the past -> {rewound}")

        start(conn_b, "B")
        if not await until("manager B to start the job", lambda: len(STARTED) >= 2):
            return seen
        seen["repicked"] = row(dsn, job_id, names)
        seen["repicked"]["by"] = STARTED[1]
        say(f"manager {STARTED[1]} re-picked it; execution 2 runs -> {shown(seen['repicked'])}")

        for step in steps:
            if not await settled(managers):
                return seen
            if step[0] in ("return", "raise"):
                n = int(step[1])
                if step[0] == "raise":
                    RAISE.add(n)
                logged = len(row(dsn, job_id, names)["log"])
                RELEASE.setdefault(n, asyncio.Event()).set()
                # retry_job or the manager's log buffer (log_jobs) adds one log entry.
                if not await until(
                    f"execution {n}'s result in pgqueuer_log",
                    partial(logged_more, dsn, job_id, logged),
                ):
                    return seen
                what = "returns" if step[0] == "return" else "raises (the executor retries)"
                label = f"execution {n} (manager {STARTED[n - 1]}) {what}"
            elif step[0] == "start":
                started = len(STARTED)
                start(conn_c, step[1])
                await until(f"manager {step[1]} to start the job", partial(more_than, started))
                label = f"manager {step[1]} starts" + (
                    f"; execution {len(STARTED)} runs on {STARTED[-1]}"
                    if len(STARTED) > started
                    else "; it picked nothing"
                )
            else:
                raise ValueError(f"unknown step {step}")
            seen[" ".join(step)] = row(dsn, job_id, names)
            seen[" ".join(step)]["running"] = list(STARTED)
            say(f"{label} -> {shown(seen[' '.join(step)])}")
        for qm in managers:
            qm.shutdown.set()
        for n in range(1, len(STARTED) + 1):
            RELEASE.setdefault(n, asyncio.Event()).set()
        await asyncio.wait_for(asyncio.gather(*runs), DEADLINE)
    finally:
        for each in conns:
            await each.close()
    return seen


def main(judge: Callable[[dict[str, Any]], tuple[bool, str]], steps: list[Step]) -> int:
    """Run the scenario, print the verdict line, return the exit status."""
    seen = asyncio.run(scenario(sys.argv[1], steps))
    ok, sentence = judge(seen)
    print(("WITNESSED: " if ok else "NOT REPRODUCED: ") + sentence, flush=True)
    return 0 if ok else 1
