"""Every example starts on clean sessions: what a queue leaves on a connection (a
session-level advisory lock, a setting, a temporary table, a LISTEN) is gone when the
pool hands the connection out again, and the simulated clock stays on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from leasecheck.stateful import clock
from leasecheck.stateful.engine import actors, sending


@pytest.fixture
def pool(reference_dsn: str) -> Iterator[actors.Pool]:
    """Return a pool of sessions on this worker's database, closed afterwards."""
    pool = actors.Pool(reference_dsn)
    yield pool
    pool.close()


def _used(pool: actors.Pool, call: Any) -> actors.Session:
    """Return a session on which `call` ran as a queue's call does, then handed back."""
    session = pool.open("w0")
    sending.submit(pool, session, call, [session])
    sending.outcome(session)
    pool.release(session)
    return session


def _leave_everything(conn: Any) -> None:
    conn.execute("select pg_advisory_lock(0, hashtext('leasecheck'))")  # saq's sweep lock
    conn.execute("set work_mem = '7MB'")
    conn.execute("create temp table scratch (x int)")
    conn.execute("listen jobs")


def test_a_session_level_advisory_lock_does_not_outlive_the_example(
    pool: actors.Pool, reference_dsn: str
) -> None:
    """A library's sweep lock, kept for life, would disable every later example's sweeps
    if another actor's session inherited it."""
    _used(pool, _leave_everything)
    with clock.connect(reference_dsn) as other:
        taken = other.execute("select pg_try_advisory_lock(0, hashtext('leasecheck'))")
        assert taken.fetchone() == (True,)


def test_settings_temp_tables_and_listens_are_cleared_and_the_clock_kept(
    pool: actors.Pool,
) -> None:
    session = _used(pool, _leave_everything)
    again = pool.open("w1")
    assert again is session  # the pool reuses it
    conn = again.conn
    assert conn.execute("show work_mem").fetchone() != ("7MB",)
    assert conn.execute("select to_regclass('pg_temp.scratch')").fetchone() == (None,)
    assert conn.execute("select count(*) from pg_listening_channels()").fetchone() == (0,)
    assert conn.execute("show search_path").fetchone() == (clock.SEARCH_PATH.replace(" ", ""),)
    clock.advance(conn, clock.EPOCH - clock.EPOCH.replace(year=2029))  # a year on
    assert conn.execute("select now() = %s", (clock.EPOCH.replace(year=2031),)).fetchone() == (
        True,
    )
    clock.reset(conn)
    pool.release(again)
