"""What the dramatiq-postgres 1.4.0 witnesses share: real dramatiq workers, and the story's start.

Every worker is a real process started as the README starts one, `dramatiq tasks`, here
`python -m dramatiq _tasks --processes 1 --threads 1` (dramatiq 2.2.1's CLI: a main
process and one worker process, with a consumer thread per queue and one worker
thread), with `dramatiq_queue_prefetch=1` in its environment (dramatiq's documented
setting, `dramatiq/worker.py` lines 45-50: "a new message is only fetched once a
previous one is done", what one runs long tasks with). `_tasks.py` declares the broker,
`PostgresBroker(url=...)` with short but legitimate intervals (heartbeat every 1 s, a
worker dead after 3 s without one, maintenance every 1 s, polls every 0.2 s), and the
actor, which records each execution (the task body's effect, the customer's receipt)
in `witness_executions` and waits until the script releases it.

The story's start (`reaped`), the script's schema installed with dramatiq-postgres's own
`dramatiq_postgres.schema.init`: worker A claims the message (execution 1) and is frozen
with SIGSTOP of its process group (both its processes: its consumer thread, whose loop
is the one that heartbeats, `broker.py` lines 296-300, stops), as when a process is
paused, swapped out, or a VM is suspended. Worker B starts; its consumer's
`maybe_maintenance` (`broker.py` lines 253-278, one worker at a time under
`pg_try_advisory_xact_lock`) runs `REAP` (lines 524-535) once A's heartbeat is 3 s old:
A's `consumed` message goes back to `queued` with `worker_id = NULL`, and B's consumer
claims it (`CLAIM`, lines 435-454): execution 2. Then A is thawed (SIGCONT) and the
script waits until A heartbeats again. Execution 1, still running in A's worker
thread, has not been told anything: nothing in dramatiq or dramatiq-postgres tells a
worker that maintenance gave its message to another.

What the script reads: dramatiq-postgres's tables (`dramatiq.queue`, `dramatiq.worker`),
every row version written to `dramatiq.queue` (an audit trigger of the script's, which
changes nothing: it records the row, the session's `application_name`, which names the
worker, and which of the library's statements, `dramatiq_postgres.broker.QUERIES`, made
the write), the executions, and the acks and nacks each worker made (dramatiq's
`after_ack`/`after_nack` hooks, `_tasks.Observer`). Every wait is for something the
library shows, with a deadline; nothing waits a fixed time.

Run with `python SCRIPT DSN` on an empty database (the matrix's witness runner makes
one); nothing else runs on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from dramatiq_postgres.broker import QUERIES
from dramatiq_postgres.schema import init

HERE = Path(__file__).resolve().parent
DEADLINE = 30.0
AUDIT = """
create table witness_writes (
    n bigserial primary key, op text not null, message_id uuid, queue_name text,
    state text, worker_id uuid, retries int, app text, query text,
    at timestamptz not null default clock_timestamp());
create function witness_write() returns trigger language plpgsql as $$
declare
    r dramatiq.queue;
begin
    if tg_op = 'DELETE' then r := old; else r := new; end if;
    insert into witness_writes
        (op, message_id, queue_name, state, worker_id, retries, app, query)
    values (tg_op, r.message_id, r.queue_name, r.state::text, r.worker_id,
            (r.message->'options'->>'retries')::int,
            current_setting('application_name'), current_query());
    return null;
end $$;
create trigger witness_write after insert or update or delete on dramatiq.queue
    for each row execute function witness_write();
"""
"""The script's observer: each row version dramatiq-postgres writes, in commit order."""
TABLES = """
create table witness_executions (
    n serial primary key, worker text not null, worker_id uuid not null,
    message_id uuid not null, retries int not null,
    started timestamptz not null default clock_timestamp());
create table witness_acks (
    n serial primary key, worker text not null, worker_id uuid, kind text not null,
    message_id uuid not null, queue_name text not null,
    at timestamptz not null default clock_timestamp());
"""


def say(line: str) -> None:
    print(line, flush=True)


def finish(witnessed: bool, sentence: str) -> int:
    say(("WITNESSED: " if witnessed else "NOT REPRODUCED: ") + sentence)
    return 0 if witnessed else 1


def _squash(text: str) -> str:
    return " ".join(text.split())


def _statements() -> dict[str, str]:
    """dramatiq-postgres's statements as the server sees them (psycopg sends %s as $n)."""
    named = {}
    for name in QUERIES.queries:
        parts = getattr(QUERIES, name).split("%s")
        sent = parts[0] + "".join(f"${i}{part}" for i, part in enumerate(parts[1:], 1))
        named[_squash(sent)] = name
    return named


STATEMENTS = _statements()


@dataclass(frozen=True)
class Write:
    """One row version dramatiq-postgres wrote to `dramatiq.queue` (the audit trigger's)."""

    n: int
    op: str
    statement: str
    by: str
    queue_name: str
    state: str
    worker_id: str | None
    retries: int
    at: float


@dataclass(frozen=True)
class Execution:
    n: int
    worker: str
    worker_id: str
    retries: int


class NotThere(Exception):
    """The replay did not get as far as the witness needs; the message says why."""


class Story:
    """One database, dramatiq worker processes on it, and what the script reads back."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.dir = Path(tempfile.mkdtemp(prefix="dramatiq-witness-"))
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.message_id = ""
        self.names: dict[str, str] = {}
        os.environ["WITNESS_DSN"] = dsn
        os.environ["WITNESS_DIR"] = str(self.dir)

    # ------------------------------------------------------------ setting up

    def open(self) -> None:
        with psycopg.connect(self.dsn) as conn, conn.cursor() as cur:
            init(cur)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(TABLES)
            conn.execute(AUDIT)
        say("install: dramatiq_postgres.schema.init(cursor) -> the dramatiq schema")
        say("  (and an audit trigger: every row version written to dramatiq.queue is recorded)")

    def close(self) -> None:
        for proc in self.workers.values():
            self._signal(proc, signal.SIGCONT)
            self._signal(proc, signal.SIGTERM)
        for proc in self.workers.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                # dramatiq waits for running actors (up to --worker-shutdown-timeout,
                # 10 min); the story's unreleased executions never end by themselves
                self._signal(proc, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)

    def start(self, name: str, queues: tuple[str, ...] = ()) -> None:
        """Start worker `name` (on every queue, or only on `queues`: dramatiq's --queues)."""
        env = {**os.environ, "WITNESS_WORKER": name, "dramatiq_queue_prefetch": "1"}
        only = ["--queues", *queues] if queues else []
        command = ["dramatiq", "_tasks", "--processes", "1", "--threads", "1", *only]
        log = (self.dir / f"{name}.log").open("wb")
        self.workers[name] = subprocess.Popen(
            [sys.executable, "-m", *command],
            cwd=HERE,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        say(f"worker {name}: python -m {' '.join(command)}")

    def freeze(self, name: str) -> None:
        os.killpg(self.workers[name].pid, signal.SIGSTOP)
        say(f"worker {name}: SIGSTOP (its processes are frozen: heartbeats included)")

    def thaw(self, name: str) -> None:
        os.killpg(self.workers[name].pid, signal.SIGCONT)
        say(f"worker {name}: SIGCONT")

    def wake(self, name: str) -> None:
        """Thaw worker `name` and wait until it heartbeats again (its consumer loop runs)."""
        thawed = self.now()
        self.thaw(name)
        beating = self.until(
            f"{name}'s heartbeat",
            lambda: (beat := self.heartbeat(name)) is not None and beat > thawed,
        )
        if not beating:
            raise NotThere(f"worker {name} did not heartbeat again after SIGCONT")
        say(
            f"worker {name} heartbeats again (dramatiq.worker); execution 1 still running;"
            f" {self.shown()}"
        )

    def send(self) -> str:
        import _tasks  # the broker needs WITNESS_DSN, set in __init__

        message = _tasks.receipt.send()
        self.message_id = message.message_id
        say(
            f"receipt.send() -> message {self.message_id} (max_retries={_tasks.MAX_RETRIES},"
            f" min_backoff={_tasks.MIN_BACKOFF} ms); "
            f"{self.shown()}"
        )
        return self.message_id

    # ------------------------------------------------------------ reading back

    def read(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def row(self) -> dict[str, Any] | None:
        """dramatiq-postgres's row of the message (None: there is none)."""
        found = self.read(
            "select state::text, queue_name, worker_id::text,"
            " (message->'options'->>'retries')::int from dramatiq.queue where message_id = %s",
            [self.message_id],
        )
        if not found:
            return None
        state, queue, worker, retries = found[0]
        return {"state": state, "queue": queue, "worker_id": worker, "retries": retries or 0}

    def who(self, worker_id: str | None) -> str:
        return "NULL" if worker_id is None else self.names.get(worker_id, worker_id[:8])

    def shown(self, r: dict[str, Any] | None = None, *, read: bool = True) -> str:
        r = self.row() if read and r is None else r
        if r is None:
            return "row: none (dramatiq.queue has no row for the message)"
        return (
            f"row: state={r['state']} queue={r['queue']} worker_id={self.who(r['worker_id'])}"
            f" retries={r['retries']}"
        )

    def writes(self, after: int = 0) -> list[Write]:
        rows = self.read(
            "select n, op, query, app, queue_name, state, worker_id::text,"
            " coalesce(retries, 0), extract(epoch from at)"
            " from witness_writes where n > %s and message_id = %s order by n",
            [after, self.message_id],
        )
        found = [
            Write(
                n=int(n),
                op=str(op),
                statement=STATEMENTS.get(_squash(str(query)), "?"),
                by=str(app).removeprefix("dramatiq-"),
                queue_name=str(queue),
                state=str(state),
                worker_id=worker,
                retries=int(retries),
                at=float(at),
            )
            for n, op, query, app, queue, state, worker, retries, at in rows
        ]
        for w in found:  # a claim writes the claimant's worker_id: name it after its session
            if w.statement == "CLAIM" and w.worker_id is not None:
                self.names.setdefault(w.worker_id, w.by)
        return found

    def last_write(self) -> int:
        return int(self.read("select coalesce(max(n), 0) from witness_writes")[0][0])

    def write(self, w: Write) -> str:
        what = "deleted" if w.op == "DELETE" else "wrote"
        return (
            f"{w.by}'s {w.statement} {what} #{w.n}: state={w.state} queue={w.queue_name}"
            f" worker_id={self.who(w.worker_id)} retries={w.retries}"
        )

    def written(self, what: str, after: int, test: Callable[[Write], bool]) -> Write | None:
        """Wait until the library has written, after write `after`, a version passing `test`."""
        found: list[Write] = []

        def ready() -> bool:
            found.extend(w for w in self.writes(after) if test(w))
            return bool(found)

        return found[0] if self.until(what, ready) else None

    def executions(self) -> list[Execution]:
        rows = self.read(
            "select n, worker, worker_id::text, retries from witness_executions order by n"
        )
        return [Execution(int(n), str(w), str(u), int(r)) for n, w, u, r in rows]

    def acks(self, worker: str, kind: str = "ack") -> int:
        """How many acks (or nacks) of a delivery of the message worker `worker` made
        (dramatiq's after_ack hook). Not counted: the ack of the delay queue's copy of a
        retry, which the consumer thread makes when it moves the retry back to its queue
        (dramatiq/worker.py lines 346-362)."""
        rows = self.read(
            "select count(*) from witness_acks where worker = %s and kind = %s"
            " and message_id = %s and queue_name not like '%%.DQ'",
            [worker, kind, self.message_id],
        )
        return int(rows[0][0])

    def now(self) -> float:
        """The server's clock (epoch seconds), the one dramatiq-postgres's NOW() reads."""
        return float(self.read("select extract(epoch from clock_timestamp())")[0][0])

    def heartbeat(self, name: str) -> float | None:
        """Worker `name`'s last heartbeat (dramatiq.worker, epoch seconds), None: no row."""
        ids = [u for u, n in self.names.items() if n == name]
        rows = self.read(
            "select extract(epoch from heartbeat_at) from dramatiq.worker"
            " where worker_id::text = any(%s)",
            [ids],
        )
        return float(rows[0][0]) if rows else None

    def release(self, n: int, outcome: str) -> None:
        (self.dir / f"release-{n}").write_text(outcome)
        say(f"execution {n}: released, it will {outcome}")

    def log(self, name: str) -> list[str]:
        """dramatiq's own log lines of worker `name` about the message or its maintenance."""
        path = self.dir / f"{name}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        keys = (self.message_id, "Requeued", "RuntimeError:")
        return [ln for ln in lines if self.message_id and any(k in ln for k in keys)]

    # ------------------------------------------------------------ waiting

    def until(self, what: str, ready: Callable[[], bool], deadline: float = DEADLINE) -> bool:
        end = time.monotonic() + deadline
        while not ready():
            if time.monotonic() > end:
                say(f"  (gave up after {deadline:g} s waiting for {what})")
                return False
            time.sleep(0.05)
        return True

    def running(self, n: int) -> Execution | None:
        """Wait until execution n has started; return it (None: it did not)."""
        if not self.until(f"execution {n}", lambda: len(self.executions()) >= n):
            return None
        found = self.executions()[n - 1]
        self.names.setdefault(found.worker_id, found.worker)
        say(
            f"execution {n} started: worker {found.worker}, retries={found.retries}; {self.shown()}"
        )
        return found

    def acked(self, name: str, kind: str = "ack", count: int = 1) -> bool:
        """Wait until worker `name` has made `count` acks (or nacks) of the message."""
        return self.until(f"worker {name}'s {kind}", lambda: self.acks(name, kind) >= count)

    def written_by_ack(self, name: str, after: int) -> list[Write]:
        """The writes after write `after` committed before worker `name`'s latest ack had
        returned (what that ack wrote, if nothing else wrote in between)."""
        rows = self.read(
            "select extract(epoch from max(at)) from witness_acks where worker = %s"
            " and kind = 'ack' and message_id = %s and queue_name not like '%%.DQ'",
            [name, self.message_id],
        )
        until = float(rows[0][0]) if rows and rows[0][0] is not None else 0.0
        return [w for w in self.writes(after) if w.at <= until]


def frozen_first(s: Story) -> int:
    """Worker A starts the message (execution 1) and is frozen; return the write mark from
    before the freeze."""
    s.start("A")
    s.send()
    first = s.running(1)
    if first is None or first.worker != "A":
        raise NotThere("worker A did not start the message")
    mark = s.last_write()
    s.freeze("A")
    return mark


def reaped(s: Story) -> None:
    """The start every witness shares: A's execution 1 frozen and requeued by maintenance run
    in B; B runs execution 2; A thawed and heartbeating again."""
    mark = frozen_first(s)
    s.start("B")
    reap = s.written("maintenance to requeue the message", mark, lambda w: w.statement == "REAP")
    if reap is None or reap.by != "B":
        raise NotThere("B's maintenance never requeued A's message")
    beat = s.heartbeat("A")
    since = "(A has no worker row)" if beat is None else f"{reap.at - beat:.1f} s after"
    say(f"maintenance (B's consumer, under the advisory lock): {s.write(reap)}")
    say(f"  {since} A's last heartbeat (heartbeat_ttl=3), A still frozen")
    claim = s.written("a claim of the requeued message", reap.n, lambda w: w.statement == "CLAIM")
    if claim is None:
        raise NotThere("nobody claimed the requeued message")
    say(f"  then B's consumer claims it: {s.write(claim)}")
    second = s.running(2)
    if second is None or second.worker != "B":
        raise NotThere("worker B did not start the requeued message")
    s.wake("A")


def stale_failure(s: Story) -> Write:
    """After `reaped`: execution 1 raises; return the write of A's retry (dramatiq's Retries
    middleware, `broker.enqueue`) if it landed on the message B is running."""
    mark = s.last_write()
    s.release(1, "raise")
    retry = s.written(
        "A's retry", mark, lambda w: w.statement == "ENQUEUE" and w.queue_name.endswith(".DQ")
    )
    if retry is None:
        raise NotThere("worker A's failure of execution 1 was never written")
    say(f"worker A: execution 1 raised; Retries -> broker.enqueue -> {s.write(retry)}")
    if retry.by != "A" or s.acks("B") or s.acks("B", "nack"):
        raise NotThere("A's failure did not land on the message B was running")
    say(f"  (B's execution 2 is running, not released, and B has not acked; {s.shown()})")
    return retry


def reinserted(s: Story) -> Execution:
    """After `reaped`: execution 1 (A's, stale) returns and A's ack deletes the row B
    consumed (the completion is accepted); B's execution 2 raises and its retry (Retries ->
    `broker.enqueue`) inserts the acked message back; a worker claims it (execution 3,
    running, not released). Return execution 3."""
    before = s.last_write()
    s.release(1, "return")
    acked = s.acked("A")
    deleted = [w for w in s.written_by_ack("A", before) if w.op == "DELETE"]
    if not acked or len(deleted) != 1 or deleted[0].by != "A" or s.who(deleted[0].worker_id) != "B":
        raise NotThere("worker A's ack did not delete the row B had consumed")
    say(f"worker A: execution 1 returned; consumer.ack -> {s.write(deleted[0])}")
    done = s.row() is None and not (s.acks("B") or s.acks("B", "nack"))
    say(f"  the completion is accepted while B's execution 2 still runs: {s.shown()}")
    if not done:
        raise NotThere("the message kept a row after A's ack, or B's execution had ended")
    before = s.last_write()
    s.release(2, "raise")
    retry = s.written("B's retry", before, lambda w: w.statement == "ENQUEUE")
    if retry is None or retry.by != "B" or retry.op != "INSERT":
        raise NotThere("B's failure did not insert the acked message back")
    say(f"worker B: execution 2 raised; Retries -> broker.enqueue -> {retry.op}: {s.write(retry)}")
    third = s.running(3)
    if third is None:
        raise NotThere("nobody ran the message again after B's retry")
    for w in s.writes(retry.n):
        say(f"  since the retry: {s.write(w)}")
    return third


def run(
    steps: Callable[[Story], int],
    max_retries: int = 3,
    min_backoff: int = 200,
    start: Callable[[Story], None] = reaped,
) -> int:
    """Play `start` (the shared one unless told) and then `steps` on the script's database;
    return the status. `max_retries` and `min_backoff` (ms) are the actor's options
    (`_tasks.receipt`)."""
    if len(sys.argv) != 2:
        raise SystemExit("usage: python SCRIPT DSN")
    sys.path.insert(0, str(HERE))
    os.environ["WITNESS_MAX_RETRIES"] = str(max_retries)
    os.environ["WITNESS_MIN_BACKOFF"] = str(min_backoff)
    s = Story(sys.argv[1])
    s.open()
    try:
        start(s)
        return steps(s)
    except NotThere as why:
        return finish(False, str(why))
    finally:
        for name in s.workers:
            for line in s.log(name):
                say(f"  dramatiq log, worker {name}: {line}")
        s.close()
