"""dramatiq-postgres 1.4.0: a worker whose message maintenance requeued still acks or retries it.

Usage: python repro.py DSN (or DSN=... python repro.py): a PostgreSQL URL or conninfo. It
creates a database dramatiq_repro_<pid> there (schema by dramatiq_postgres.init) and drops
it at the end. Worker A, a dramatiq Worker in a process of its own, takes a message whose
first execution lasts 8 s; as soon as A has it, A is paused (SIGSTOP) until worker B, in
this process, has taken the message over: B's maintenance requeues it once A's heartbeat is 3 s old,
and B runs it (6 s). Then A goes on. Twice: A's late execution returns, then it raises.
Exit 1 if A's late ack or retry landed on B's delivery (the bug), 0 if not.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import time

os.environ.setdefault("dramatiq_queue_prefetch", "1")  # one message at a time per worker

import dramatiq
import psycopg
from dramatiq import Worker
from dramatiq.middleware import CurrentMessage
from dramatiq_postgres import PostgresBroker, init
from psycopg.conninfo import make_conninfo

DSN = sys.argv[1] if len(sys.argv) > 1 else os.environ["DSN"]
NAME = f"dramatiq_repro_{os.getpid()}"
SETTINGS = dict(heartbeat_interval=1, heartbeat_ttl=3, maintenance_interval=1, poll_interval=0.2)
B_RUNNING, B_DONE = threading.Event(), threading.Event()  # B's execution (B: this process)
logging.basicConfig(level=logging.ERROR)  # dramatiq's errors (A's traceback) go to stderr
logging.getLogger("dramatiq_postgres").setLevel(logging.INFO)  # "Requeued 1 messages ..."


def receipt(fail: bool, t0: float) -> None:
    me = os.environ.get("REPRO_WORKER", "B")
    message = CurrentMessage.get_current_message()
    retries = message.options.get("retries", 0) if message else 0
    print(f"{time.time() - t0:5.1f}s {me}: execution starts, retries={retries}", flush=True)
    if me == "B":
        B_RUNNING.set()
    time.sleep(8 if me == "A" and retries == 0 else 6 if me == "B" else 1)
    print(f"{time.time() - t0:5.1f}s {me}: execution ends", flush=True)
    if me == "B":
        B_RUNNING.clear()
        B_DONE.set()
    if fail and me == "A" and retries == 0:
        raise TimeoutError("the gateway did not answer")


def setup(url: str) -> dramatiq.Actor:
    broker = PostgresBroker(url=url, **SETTINGS)
    broker.add_middleware(CurrentMessage())
    dramatiq.set_broker(broker)
    return dramatiq.actor(receipt, max_retries=3, min_backoff=500, max_backoff=1000)


def worker_a(url: str) -> None:  # what `dramatiq repro --processes 1 --threads 1` runs
    os.environ["REPRO_WORKER"] = "A"
    setup(url)
    Worker(dramatiq.get_broker(), worker_threads=1).start()
    threading.Event().wait()


def read(url: str, message_id: str) -> tuple[str, str] | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT state::text, worker_id::text FROM dramatiq.queue WHERE message_id = %s",
            [message_id],
        ).fetchone()
    return (row[0], row[1] or "") if row else None


def scenario(url: str, actor: dramatiq.Actor, fail: bool) -> bool:
    print(f"-- A's late execution {'raises' if fail else 'returns'}")
    t0, b_id = time.time(), dramatiq.get_broker().worker_id
    a = multiprocessing.get_context("spawn").Process(target=worker_a, args=(url,))
    a.start()
    message_id, b, seen, bug, thawed = actor.send(fail, t0).message_id, None, None, False, False
    B_DONE.clear()
    while time.time() - t0 < 30 and not B_DONE.is_set():
        row = read(url, message_id)
        if row != seen:
            who = "-" if row is None or not row[1] else "B" if row[1] == b_id else "A"
            state = "no row (acked)" if row is None else f"state={row[0]} worker={who}"
            print(f"{time.time() - t0:5.1f}s row: {state}", flush=True)
            seen = row
            a_runs = row is not None and row[0] == "consumed" and who == "A"
            bug = bug or (B_RUNNING.is_set() and (row is None if not fail else a_runs))
        if b is None and row and row[0] == "consumed":
            os.kill(a.pid, signal.SIGSTOP)  # A, with the message, is paused
            print(f"{time.time() - t0:5.1f}s A: paused (SIGSTOP)", flush=True)
            b = Worker(dramatiq.get_broker(), worker_threads=1)
            b.start()
        if b is not None and B_RUNNING.is_set() and not thawed:
            os.kill(a.pid, signal.SIGCONT)  # B has taken the message over: A goes on
            print(f"{time.time() - t0:5.1f}s A: resumed (SIGCONT)", flush=True)
            thawed = True
        time.sleep(0.05)
    if b is not None:
        b.join()  # B's ack has run
        print(f"{time.time() - t0:5.1f}s B: acked; row: {read(url, message_id) or 'no row'}")
        b.stop()
    a.kill()
    a.join()
    return bug


def main() -> None:
    admin = make_conninfo(DSN)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {NAME}")
    url = make_conninfo(admin, dbname=NAME)
    try:
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            init(cur)
        actor = setup(url)
        bugs = [scenario(url, actor, fail) for fail in (False, True)]
        dramatiq.get_broker().close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {NAME} WITH (FORCE)")
    print(f"A's late ack deleted the message while B was running it: {bugs[0]}")
    print(f"A's late retry re-queued B's message and A ran it beside B: {bugs[1]}")
    sys.exit(1 if any(bugs) else 0)


if __name__ == "__main__":
    main()
