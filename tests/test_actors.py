"""Sessions: where a call runs, and that a stuck one still ends in `Stuck`, or in
`CallHung` when it goes on after its statement was cancelled."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from leasecheck.stateful.engine import actors, ending, sending

LOCK = "select pg_advisory_lock(4242)"
XACT_LOCK = "select pg_advisory_xact_lock(4242)"


@pytest.fixture
def pool(reference_dsn: str) -> Iterator[actors.Pool]:
    """Return a pool of sessions on this worker's database, closed afterwards."""
    pool = actors.Pool(reference_dsn)
    yield pool
    pool.close()


@pytest.fixture
def pair(pool: actors.Pool) -> Iterator[tuple[actors.Session, actors.Session]]:
    """Return two sessions from the pool, handed back (and closed with it) afterwards."""
    a, b = pool.open("a"), pool.open("b")
    yield a, b
    pool.release(a)
    pool.release(b)


def _lock(conn: psycopg.Connection[Any]) -> None:
    conn.execute(XACT_LOCK)


def test_a_call_nothing_could_block_runs_at_once(
    pool: actors.Pool, pair: tuple[actors.Session, actors.Session]
) -> None:
    """With no transaction held open and no call in flight, the call runs on the
    caller's own thread: no hand-off to the session's."""
    a, b = pair

    def lock_and_say_where(c: psycopg.Connection[Any]) -> threading.Thread:
        _lock(c)
        return threading.current_thread()

    future = sending.submit(pool, a, lock_and_say_where, [a, b])
    assert future.result() is threading.current_thread()


def test_a_call_behind_a_held_transaction_waits_on_its_thread(
    pool: actors.Pool, pair: tuple[actors.Session, actors.Session]
) -> None:
    """The holder's commit, a later step, releases it: the call cannot run inline."""
    a, b = pair
    a.conn.execute("begin")
    a.conn.execute(XACT_LOCK)
    sending.submit(pool, b, _lock, [a, b])  # inline, it would hang here until Stuck
    sending.settle(pool, [a, b])
    assert b.pending is not None and not b.pending.done()
    a.conn.execute("commit")
    sending.settle(pool, [a, b])
    assert b.pending.done() and b.pending.exception() is None


def test_an_inline_call_stuck_outside_the_harness_ends_in_stuck(
    pool: actors.Pool,
    pair: tuple[actors.Session, actors.Session],
    reference_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session-level advisory lock held by a stranger blocks the call; the watchdog
    cancels it after the safety timeout instead of letting the run hang."""
    monkeypatch.setattr(pool, "deadline", 1.0)
    a, _ = pair
    with psycopg.connect(reference_dsn, autocommit=True) as stranger:
        stranger.execute(LOCK)
        with pytest.raises(actors.Stuck, match="a's call neither finished"):
            sending.submit(pool, a, lambda c: c.execute(LOCK), [a])


def _retry_forever(conn: psycopg.Connection[Any]) -> None:
    """A library's reconnect loop: every database error is tried again."""
    while True:
        try:
            conn.execute("select pg_sleep(3600)")
        except psycopg.Error:
            continue


def test_a_call_on_its_thread_that_retries_forever_is_ended(
    pool: actors.Pool, pair: tuple[actors.Session, actors.Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sent on its session's thread (a transaction is held open), the call outlives its
    deadline and its cancelled statement: `settle` ends it in its thread, and says so."""
    monkeypatch.setattr(pool, "deadline", 1.0)
    monkeypatch.setattr(actors, "GRACE", 0.5)
    a, b = pair
    a.conn.execute("begin")
    sending.submit(pool, b, _retry_forever, [a, b])
    with pytest.raises(actors.CallHung, match="b's call did not return within 1 s"):
        sending.settle(pool, [a, b])
    assert b.pending is not None and b.pending.done()  # its thread is free again
    assert isinstance(b.pending.exception(), actors.CallHung)
    a.conn.execute("rollback")


def test_an_inline_call_that_retries_forever_is_ended(
    pool: actors.Pool, pair: tuple[actors.Session, actors.Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the machine's own thread: the watchdog cancels its statement, then ends it."""
    monkeypatch.setattr(pool, "deadline", 1.0)
    monkeypatch.setattr(actors, "GRACE", 0.5)
    a, _ = pair
    with pytest.raises(actors.CallHung, match="a's call did not return within 1 s"):
        sending.submit(pool, a, _retry_forever, [a])


def test_calls_in_a_deadlock_are_left_for_the_caller_to_break(
    pool: actors.Pool, pair: tuple[actors.Session, actors.Session]
) -> None:
    """A cycle is stuck for good, like a wait on a held transaction: `settle` returns
    instead of raising, and cancelling the newest call (as PostgreSQL would) frees it."""
    a, b = pair
    a.conn.execute("begin")
    a.conn.execute("select pg_advisory_xact_lock(1)")
    both = "select pg_advisory_xact_lock(2), pg_advisory_xact_lock(1)"
    sending.submit(pool, b, lambda c: c.execute(both), [a, b])  # takes 2, waits on a for 1
    sending.settle(pool, [a, b])
    sending.submit(pool, a, lambda c: c.execute("select pg_advisory_xact_lock(2)"), [a, b])
    sending.settle(pool, [a, b])  # a waits on b, b on a
    assert a.pending is not None and not a.pending.done()
    assert b.pending is not None and not b.pending.done()
    pool.cancel(a)
    sending.settle(pool, [a, b])
    with pytest.raises(psycopg.errors.QueryCanceled):
        sending.outcome(a)
    a.conn.execute("rollback")
    sending.settle(pool, [a, b])
    assert b.pending.done() and b.pending.exception() is None


def test_closing_the_pool_ends_a_session_it_never_got_back(reference_dsn: str) -> None:
    """A session handed out and never released (a run stopped mid-example) holding a row
    lock in an open transaction: closing the pool ends its backend, so no later run on
    the database meets the lock at a moment the garbage collector picks."""
    pool = actors.Pool(reference_dsn)
    kept = pool.open("w0")
    kept.conn.execute("begin")
    kept.conn.execute("select pg_advisory_xact_lock(4242)")
    pid = kept.pid
    pool.close()
    with psycopg.connect(reference_dsn, autocommit=True) as conn:
        row = conn.execute("select count(*) from pg_stat_activity where pid = %s", (pid,))
        assert row.fetchone() == (0,)
        free = conn.execute("select pg_try_advisory_lock(4242)").fetchone()
        assert free == (True,)


def test_a_rollback_on_a_backend_the_harness_ended_is_not_reported(
    pool: actors.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    """A library's transaction block raises after a crash ended its backend; psycopg's
    rollback then meets the termination and warns. The harness caused it: not shown. The
    same warning about a connection the harness did not end still is."""
    b = pool.open("b")
    inside = threading.Event()

    def raises_after_its_backend_ended(c: psycopg.Connection[Any]) -> None:
        pid = c.info.backend_pid
        with c.transaction():
            c.execute("select 1")
            inside.set()
            with psycopg.connect(pool.dsn, autocommit=True) as watcher:
                gone = "select not exists (select from pg_stat_activity where pid = %s)"
                while watcher.execute(gone, (pid,)).fetchone() != (True,):
                    pass
            raise RuntimeError("the library's own error, after the crash")

    sending.submit(pool, b, raises_after_its_backend_ended, [b], after=99)  # its own thread
    assert inside.wait(10)
    with caplog.at_level("WARNING", logger="psycopg"):
        pool.terminate(b)
    assert isinstance(b.pending.exception() if b.pending else None, RuntimeError)
    assert not [r for r in caplog.records if "error ignored in rollback" in r.getMessage()]
    pool.release(b)
    with psycopg.connect(pool.dsn) as own:
        record = logging.LogRecord("psycopg", logging.WARNING, "", 0, "%s: %s", (own, "x"), None)
        assert ending._QUIET.filter(record)
