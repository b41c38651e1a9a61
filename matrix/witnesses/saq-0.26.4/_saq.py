"""What the saq 0.26.4 witnesses share: saq's own worker processes, and the story's start.

Every worker is a real process started with saq's own command line, `python -m saq
_saq.settings -v` (`saq/__main__.py`, `saq/runner.py`, `saq.worker.start`): a
`saq.Worker` on a `PostgresQueue.from_url(dsn)` with its own connection pool, its
upkeep tasks (sweep, schedule, abort, worker info) and its process tasks. The
settings changed from saq's defaults: the upkeep timers, 1 s each instead of 60 s for
the sweep and 10 s for worker info, so the story takes seconds (the sweep's wait for a
stuck job to stop is saq's own default, `sweep(..., abort=5.0)`); and
`poll_interval=0.2`, saq's documented polling mode instead of LISTEN/NOTIFY
(`saq/worker.py` lines 80-81). In LISTEN mode a worker that has just started can miss
the notification of a job its own `schedule` upkeep dequeued before its LISTEN was in
place (`saq/queue/postgres.py` lines 592-625 and 697-698), and the job then waits in
its memory, `active` in the table, until the next notification, which made the moment
B starts its execution vary; the bug witnessed here does not depend on the mode.

The job is the one a user with a long task writes: `heartbeat=3` (saq's lease: "the
maximum amount of time a job can survive without a heartbeat in seconds [...] a
heartbeat can be triggered manually within a job by calling await job.update()",
`saq/job.py` lines 86-87), `timeout=0` (no limit on the run time), `retries=3` and
`ttl=0` (the finished row is kept, so it can be read). Its body records each
execution in a table of the script's own (`witness_executions`: the body's effect,
the customer's receipt), then calls `await job.update()` every 0.5 s until the script
releases it (a file), and returns or raises as told.

The story's start (`swept`): worker S, with no job slots (`concurrency=0`), takes
saq's sweep lock, `pg_try_advisory_lock(0, hashtext(queue))`, which it keeps for life
(`saq/queue/postgres.py` lines 361-375; the script waits until pg_locks shows S holds
it, so the sweep runs in S). Worker A takes the job (execution 1) and is frozen with
SIGSTOP: its heartbeats stop, as when a process is paused, swapped out, or its event
loop is blocked by a synchronous call in an async task. S's sweep finds the job stuck
(not touched for more than 3 s, `Job.stuck`, job.py lines 252-258), writes it
`aborting`, waits 5 s for it to stop (`job.refresh(abort)`, postgres.py lines
442-447) and re-queues it whether or not it stopped (lines 449-450; A was frozen the
whole time). Worker B starts and takes it: execution 2. Then A is thawed (SIGCONT).
Every wait is for something saq shows (a row, a lock, an execution), with a deadline.

Run with `python SCRIPT DSN` on an empty database (the matrix's witness runner makes
one); nothing else runs on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from saq.queue.postgres import PostgresQueue

QUEUE = "witness"
HEARTBEAT = 3
BEAT = 0.5
DEADLINE = 30.0
HERE = Path(__file__).resolve().parent
Row = dict[str, Any]
AUDIT = """
create table witness_writes (n bigserial primary key, status text not null, job jsonb not null);
create function witness_write() returns trigger language plpgsql as $$
begin
    insert into witness_writes (status, job)
    values (new.status, convert_from(new.job, 'UTF8')::jsonb);
    return new;
end $$;
create trigger witness_write after insert or update on saq_jobs
    for each row execute function witness_write();
"""
"""The script's observer: each row version saq writes, in commit order (it changes nothing)."""


def say(line: str) -> None:
    print(line, flush=True)


# ----------------------------------------------------------------- the worker side


def settings() -> dict[str, Any]:
    """saq's settings for one worker process (`python -m saq _saq.settings`)."""
    name = os.environ["WITNESS_WORKER"]
    dsn = make_conninfo(os.environ["WITNESS_DSN"], application_name=f"saq-worker-{name}")
    return {
        "queue": PostgresQueue.from_url(dsn, name=QUEUE),
        "functions": [receipt],
        "concurrency": int(os.environ["WITNESS_CONCURRENCY"]),
        "id": name,
        "timers": {"sweep": 1, "schedule": 1, "abort": 1, "worker_info": 1},
        "poll_interval": 0.2,
    }


async def receipt(ctx: dict[str, Any], **kwargs: Any) -> str:
    """The task: record this execution (the receipt), heartbeat until released, end as told."""
    job, worker = ctx["job"], ctx["worker"]
    async with await psycopg.AsyncConnection.connect(
        os.environ["WITNESS_DSN"], autocommit=True
    ) as conn:
        cur = await conn.execute(
            "insert into witness_executions (worker, attempts) values (%s, %s) returning n",
            [worker.id, job.attempts],
        )
        row = await cur.fetchone()
    assert row is not None
    n = int(row[0])
    release = Path(os.environ["WITNESS_DIR"]) / f"release-{n}"
    while not release.exists():
        await job.update()  # saq's heartbeat, as job.py line 87 says
        await asyncio.sleep(BEAT)
    if release.read_text() == "raise":
        raise RuntimeError(f"execution {n} failed (the witness asked it to)")
    return f"receipt {n}"


# ----------------------------------------------------------------- the script side


class Story:
    """One database, saq's worker processes on it, and what the script reads back."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.dir = Path(tempfile.mkdtemp(prefix="saq-witness-"))
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.queue = PostgresQueue.from_url(dsn, name=QUEUE)
        self.key = ""

    async def open(self) -> None:
        await self.queue.connect()  # saq's own migration, PostgresQueue.init_db
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "create table witness_executions (n serial primary key, worker text not null,"
                " attempts int not null, started timestamptz not null default clock_timestamp())"
            )
            conn.execute(AUDIT)
        say("install: PostgresQueue.connect() -> saq's schema (init_db)")
        say("  (and an audit trigger: every row saq writes to saq_jobs is recorded, read-only)")

    async def close(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        await self.queue.disconnect()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, name: str, concurrency: int = 1) -> None:
        env = {
            **os.environ,
            "WITNESS_WORKER": name,
            "WITNESS_DSN": self.dsn,
            "WITNESS_DIR": str(self.dir),
            "WITNESS_CONCURRENCY": str(concurrency),
        }
        log = (self.dir / f"{name}.log").open("wb")
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", "saq", "_saq.settings", "-v"],
            cwd=HERE,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        say(f"worker {name}: python -m saq _saq.settings (concurrency={concurrency})")

    def freeze(self, name: str) -> None:
        self.workers[name].send_signal(signal.SIGSTOP)
        say(f"worker {name}: SIGSTOP (frozen: its event loop, heartbeats included, stops)")

    def thaw(self, name: str) -> None:
        self.workers[name].send_signal(signal.SIGCONT)
        say(f"worker {name}: SIGCONT")

    async def enqueue(self) -> str:
        job = await self.queue.enqueue("receipt", heartbeat=HEARTBEAT, timeout=0, retries=3, ttl=0)
        assert job is not None
        self.key = job.key
        say(
            f"enqueue receipt (heartbeat={HEARTBEAT}, timeout=0, retries=3, ttl=0) -> job "
            f"{job.key}; {self.shown()}"
        )
        return job.key

    def read(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def row(self) -> dict[str, Any]:
        """saq's row of the job: its status column and the job blob it writes whole."""
        found = self.read(
            "select status, job, extract(epoch from clock_timestamp()) * 1000"
            " from saq_jobs where key = %s",
            [self.key],
        )
        assert found, f"saq has no row {self.key}"
        status, blob, now_ms = found[0]
        data = json.loads(bytes(blob))
        touched, completed = data.get("touched") or 0, data.get("completed") or 0
        return {
            "status": status,
            "attempts": data.get("attempts", 0),
            "worker_id": data.get("worker_id"),
            "touched_age": (float(now_ms) - touched) / 1000 if touched else None,
            "completed_age": (float(now_ms) - completed) / 1000 if completed else None,
        }

    def shown(self, r: dict[str, Any] | None = None) -> str:
        r = r or self.row()
        age = "-" if r["touched_age"] is None else f"{r['touched_age']:.1f} s ago"
        done = "" if r["completed_age"] is None else f" completed={r['completed_age']:.1f} s ago"
        return (
            f"row: status={r['status']} attempts={r['attempts']} worker_id={r['worker_id']}"
            f" touched={age}{done}"
        )

    def writes(self, after: int = 0) -> list[dict[str, Any]]:
        """Every row saq wrote for the job after write number `after` (the audit trigger)."""
        rows = self.read(
            "select n, status, job->>'worker_id', (job->>'attempts')::int, job ? 'completed'"
            " from witness_writes where n > %s and job->>'key' = %s order by n",
            [after, self.key],
        )
        return [
            {"n": n, "status": st, "worker_id": w, "attempts": a or 0, "completed": bool(c)}
            for n, st, w, a, c in rows
        ]

    def last_write(self) -> int:
        rows = self.read("select coalesce(max(n), 0) from witness_writes")
        return int(rows[0][0])

    async def written(self, what: str, after: int, test: Callable[[Row], bool]) -> Row | None:
        """Wait until saq has written, after write `after`, a row of the job passing `test`."""
        found: list[dict[str, Any]] = []

        def ready() -> bool:
            found.extend(w for w in self.writes(after) if test(w))
            return bool(found)

        return found[0] if await self.until(what, ready) else None

    @staticmethod
    def write(w: dict[str, Any]) -> str:
        done = " completed" if w["completed"] else ""
        return (
            f"saq wrote #{w['n']}: status={w['status']} attempts={w['attempts']}"
            f" worker_id={w['worker_id']}{done}"
        )

    def executions(self) -> list[tuple[int, str, int]]:
        rows = self.read("select n, worker, attempts from witness_executions order by n")
        return [(int(n), str(w), int(a)) for n, w, a in rows]

    def sweeper(self) -> str | None:
        """The worker whose pool connection holds saq's sweep lock for the queue, if any."""
        found = self.read(
            "select a.application_name from pg_locks l join pg_stat_activity a using (pid)"
            " where l.locktype = 'advisory' and l.granted and l.classid = 0 and l.objsubid = 2"
            " and l.objid = (hashtext(%s)::bigint & 4294967295)::oid",
            [QUEUE],
        )
        return str(found[0][0]).removeprefix("saq-worker-") if found else None

    def stats(self) -> dict[str, dict[str, Any]]:
        """saq's own per-worker counters (`saq_stats`, written by each worker's upkeep)."""
        rows = self.read("select worker_id, stats from saq_stats order by worker_id")
        return {str(w): dict(s) for w, s in rows}

    def release(self, n: int, outcome: str) -> None:
        (self.dir / f"release-{n}").write_text(outcome)
        verb = "return" if outcome == "return" else "raise"
        say(f"execution {n}: released, it will {verb}")

    def log(self, name: str, *words: str) -> list[str]:
        """saq's own log lines of worker `name` about the job that contain all `words`."""
        path = self.dir / f"{name}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return [ln for ln in lines if self.key in ln and all(w in ln for w in words)]

    async def until(self, what: str, ready: Callable[[], bool]) -> bool:
        end = time.monotonic() + DEADLINE
        while not ready():
            if time.monotonic() > end:
                say(f"  (gave up after {DEADLINE:g} s waiting for {what})")
                return False
            await asyncio.sleep(0.05)
        return True

    async def seen(self, what: str, test: Callable[[Row], bool]) -> Row | None:
        """Wait until a read of the job's row passes `test`; return that row (None: never)."""
        found: list[dict[str, Any]] = []

        def ready() -> bool:
            r = self.row()
            if test(r):
                found.append(r)
            return bool(found)

        return found[0] if await self.until(what, ready) else None

    async def running(self, n: int) -> tuple[int, str, int] | None:
        """Wait until execution n of the job has started; return it (n, worker, attempts)."""
        if not await self.until(f"execution {n}", lambda: len(self.executions()) >= n):
            return None
        found = self.executions()[n - 1]
        say(f"execution {n} started: worker {found[1]}, attempts {found[2]}; {self.shown()}")
        return found

    async def finished(self, name: str, count: int = 1) -> bool:
        """Wait until worker `name` has logged `count` 'Finished' lines for the job."""
        return await self.until(
            f"worker {name} to finish the job", lambda: len(self.log(name, "Finished")) >= count
        )

    async def counted(self, name: str, counter: str, value: int) -> bool:
        """Wait until saq's stats of worker `name` show `counter` at least `value`."""
        return await self.until(
            f"saq_stats of {name}: {counter} >= {value}",
            lambda: int(self.stats().get(name, {}).get(counter, 0)) >= value,
        )


class NotThere(Exception):
    """The replay did not get as far as the witness needs; the message says why."""


async def swept(s: Story) -> None:
    """The start every witness shares: A's execution 1 frozen and re-queued, B runs execution 2."""
    s.start("S", concurrency=0)
    if not await s.until("S to take saq's sweep lock", lambda: s.sweeper() == "S"):
        raise NotThere("worker S never took saq's sweep lock")
    say("worker S holds saq's sweep lock: pg_try_advisory_lock(0, hashtext('witness'))")
    s.start("A")
    await s.enqueue()
    first = await s.running(1)
    if first is None or first[1] != "A":
        raise NotThere("worker A did not start the job")
    s.freeze("A")
    aborting = await s.seen("the sweep to abort the job", lambda r: r["status"] == "aborting")
    if aborting is None:
        raise NotThere("saq's sweep never found A's job stuck")
    since = time.monotonic()
    say(f"S's sweep: job stuck, written aborting; {s.shown(aborting)}")
    queued = await s.seen("the sweep to re-queue the job", lambda r: r["status"] == "queued")
    if queued is None:
        raise NotThere("saq's sweep never re-queued the job")
    waited = time.monotonic() - since
    say(f"S's sweep: {waited:.1f} s later (abort=5.0) re-queued it, A still frozen;")
    say(f"  {s.shown(queued)}")
    s.start("B")
    second = await s.running(2)
    if second is None or second[1] != "B":
        raise NotThere("worker B did not start the re-queued job")
    s.thaw("A")
    say(
        "  (thawed, A's execution 1 heartbeats again: each job.update() writes A's whole job "
        "blob back under the row's current status, so the row shows A's or B's blob in turn)"
    )


async def stale_retry(s: Story) -> tuple[Row, tuple[int, str, int] | None, float]:
    """After `swept`: execution 1 raises; return saq's write of its retry, execution 3 (the job
    handed out again, or None) and the seconds from a heartbeat of B to that write."""
    beat = await s.seen("a heartbeat of B", lambda r: r["worker_id"] == "B")
    if beat is None:
        raise NotThere("worker B's heartbeat never showed")
    seen, mark = time.monotonic(), s.last_write()
    say(f"worker B heartbeats (job.update()) -> {s.shown(beat)}")
    s.release(1, "raise")
    retried = await s.written("A's retry", mark, lambda w: w["status"] == "queued")
    if retried is None:
        raise NotThere("worker A's failure of execution 1 was never written")
    since = time.monotonic() - seen
    say(f"worker A: execution 1 raised; saq's job.retry(error) -> {s.write(retried)}")
    if retried["worker_id"] != "A" or s.log("B", "Finished"):
        raise NotThere("A's failure did not re-queue the job B was running")
    return retried, await s.running(3), since


async def owner_then_stale(s: Story) -> tuple[Row, Row] | None:
    """After `swept`: B's execution 2 returns, then A's execution 1; return saq's writes of
    the two completions (None, said, if either was not written)."""
    mark = s.last_write()
    s.release(2, "return")
    own = await s.written(
        "B's completion", mark, lambda w: w["status"] == "complete" and w["worker_id"] == "B"
    )
    if own is None or not await s.finished("B"):
        say("worker B's completion of execution 2 was never written")
        return None
    say(f"worker B: execution 2 returned; saq's job.finish(COMPLETE) -> {s.write(own)}")
    s.release(1, "return")
    stale = await s.written(
        "A's completion", own["n"], lambda w: w["completed"] and w["worker_id"] == "A"
    )
    if stale is None or not await s.finished("A"):
        say("worker A's completion of execution 1 was never written")
        return None
    say(f"worker A: execution 1 returned; saq's job.finish(COMPLETE) -> {s.write(stale)}")
    return own, stale


def finish(witnessed: bool, sentence: str) -> int:
    say(("WITNESSED: " if witnessed else "NOT REPRODUCED: ") + sentence)
    return 0 if witnessed else 1


def run(steps: Callable[[Story], Awaitable[int]]) -> int:
    """Play the shared start and then `steps` on the script's database; return the status."""
    if len(sys.argv) != 2:
        raise SystemExit("usage: python SCRIPT DSN")

    async def play() -> int:
        s = Story(sys.argv[1])
        await s.open()
        try:
            await swept(s)
            return await steps(s)
        except NotThere as why:
            return finish(False, str(why))
        finally:
            for name in s.workers:
                for line in s.log(name):
                    say(f"  saq log, worker {name}: {line.split(':', 2)[-1].strip()}")
            await s.close()

    return asyncio.run(play())
