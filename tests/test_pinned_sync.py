"""`leasecheck.adapters.pinned_sync`: psycopg_pool's sync pool, lending the harness's connection.

On a database of this module's own with a real table: what one session does must be
seen, or not seen, from another.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from leasecheck.adapters import pinned
from leasecheck.adapters.pinned_sync import (
    NestedBorrow,
    PinnedSyncConnection,
    PinnedSyncPool,
    PoolClosed,
)
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock
from leasecheck.stateful.engine.gates import Gate, GatedConnection

INTRANS = TransactionStatus.INTRANS


@pytest.fixture(scope="module")
def pin_dsn(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a DSN for a database of this module's own with the clock and a jobs table."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_pinsync") as dsn:
        with clock.connect(dsn) as conn:
            clock.install(conn)
            conn.execute("create table pin_jobs (id int primary key, worker text)")
        yield dsn


@pytest.fixture
def conn(pin_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a harness-style connection (gated, autocommit, simulated time) on 3 jobs."""
    with clock.connect(pin_dsn, GatedConnection) as c:
        c.execute("truncate pin_jobs")
        c.execute("insert into pin_jobs (id) select generate_series(1, 3)")
        yield c


@pytest.fixture
def other(pin_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a second session, to see what the first one committed."""
    with psycopg.connect(pin_dsn, autocommit=True) as c:
        yield c


def _ids(db: psycopg.Connection[Any], where: str = "true") -> list[int]:
    return [row[0] for row in db.execute(f"select id from pin_jobs where {where} order by id")]


def _claim_next(pool: Any, worker: str) -> int | None:
    """A psycopg_pool "library" as such libraries are written: borrow a connection, one
    transaction, UPDATE ... RETURNING, read the row; the row count is never looked at."""
    with pool.connection() as c, c.transaction():
        cur = c.execute(
            "update pin_jobs set worker = %s where id = ("
            " select id from pin_jobs where worker is null order by id"
            " limit 1 for update skip locked"
            ") returning id",
            (worker,),
        )
        row = cur.fetchone()
    return None if row is None else int(row[0])


def test_every_statement_runs_on_the_harness_connection(conn: psycopg.Connection[Any]) -> None:
    """connection(), getconn() and cursors: one backend, the harness's own."""
    pool = PinnedSyncPool(conn)
    own = conn.info.backend_pid
    found = []
    with pool.connection() as c:
        found.append(c.execute("select pg_backend_pid()").fetchone()[0])
        with c.cursor() as cur:
            cur.execute("select pg_backend_pid()")
            found.append(cur.fetchone()[0])
    lent = pool.getconn()
    found.append(lent.execute("select pg_backend_pid()").fetchone()[0])
    pool.putconn(lent)
    assert found == [own, own, own]
    assert lent is pool.conn and pool.conn.sync is conn


def test_a_library_call_runs_through_the_pin(
    conn: psycopg.Connection[Any], other: psycopg.Connection[Any]
) -> None:
    """A library's borrow + transaction + UPDATE ... RETURNING: on the harness's session,
    round trip by round trip through its gate, with the row count the library dropped."""
    pool = PinnedSyncPool(conn)
    assert isinstance(conn, GatedConnection)
    gate = conn.gate = Gate(after=1_000)
    assert _claim_next(pool, "a") == 1
    assert gate.trips == 3  # BEGIN, the UPDATE, COMMIT: each one the harness could pause
    assert (pool.last_status, pool.last_rowcount) == ("UPDATE 1", 1)
    assert _ids(other, "worker = 'a'") == [1]  # the library's own transaction committed
    assert _claim_next(pool, "b") == 2
    assert _claim_next(pool, "c") == 3
    assert _claim_next(pool, "d") is None
    assert (pool.last_status, pool.last_rowcount) == ("UPDATE 0", 0)


def test_a_library_call_inside_a_held_transaction_is_the_harnesss_to_end(
    conn: psycopg.Connection[Any], other: psycopg.Connection[Any]
) -> None:
    """The harness holds a transaction open (BEGIN on its autocommit session): the
    library's block becomes a savepoint, and the claim is not committed on return."""
    pool = PinnedSyncPool(conn)
    conn.execute("begin")
    assert _claim_next(pool, "a") == 1
    assert conn.info.transaction_status == INTRANS
    assert _ids(other, "worker is not null") == []
    conn.execute("rollback")
    assert _ids(conn, "worker is not null") == []


def test_the_row_count_spy_sees_an_update_match_no_row_or_one(
    conn: psycopg.Connection[Any],
) -> None:
    """last_status and last_rowcount: the latest statement through the pool, any face."""
    pool = PinnedSyncPool(conn)
    assert (pool.last_status, pool.last_rowcount) == (None, -1)
    with pool.connection() as c:
        c.execute("update pin_jobs set worker = 'x' where id = 2")
    assert (pool.last_status, pool.last_rowcount) == ("UPDATE 1", 1)
    with pool.connection() as c, c.cursor() as cur:
        cur.execute("update pin_jobs set worker = 'x' where id = 99")
    assert (pool.last_status, pool.last_rowcount) == ("UPDATE 0", 0)
    with pool.connection() as c, c.cursor() as cur:
        cur.executemany("update pin_jobs set worker = 'y' where id = %s", [(1,), (3,)])
    assert pool.last_status == "UPDATE 1" and pool.last_rowcount == 2
    conn.execute("update pin_jobs set worker = 'z'")  # not through the pool: not seen
    assert pool.last_rowcount == 2


def test_leaving_a_borrow_does_not_commit(
    conn: psycopg.Connection[Any], other: psycopg.Connection[Any]
) -> None:
    """An insert in the harness's open transaction stays uncommitted after the block."""
    pool = PinnedSyncPool(conn)
    conn.execute("begin")
    with pool.connection() as c:
        c.execute("insert into pin_jobs (id) values (4)")
    lent = pool.getconn()
    lent.execute("insert into pin_jobs (id) values (5)")
    pool.putconn(lent)
    with lent:  # psycopg's connection context would commit here, and close
        pass
    lent.close()
    assert conn.info.transaction_status == INTRANS
    assert _ids(other) == [1, 2, 3]
    assert _ids(conn) == [1, 2, 3, 4, 5]
    conn.execute("rollback")
    assert _ids(other) == _ids(conn) == [1, 2, 3]


def test_leaving_a_borrow_on_an_error_does_not_roll_back(
    conn: psycopg.Connection[Any], other: psycopg.Connection[Any]
) -> None:
    """The error goes up as it is; the harness's transaction and its work stay."""
    pool = PinnedSyncPool(conn)
    conn.execute("begin")

    def library() -> None:
        with pool.connection() as c:
            c.execute("insert into pin_jobs (id) values (4)")
            raise RuntimeError("the library gave up")

    with pytest.raises(RuntimeError, match="library"):
        library()
    assert conn.info.transaction_status == INTRANS
    assert _ids(conn) == [1, 2, 3, 4]
    conn.execute("commit")
    assert _ids(other) == [1, 2, 3, 4]


def test_a_real_pool_would_end_the_harnesss_transaction(pin_dsn: str) -> None:
    """What the pin does not do, shown on psycopg_pool itself: leaving `connection()`
    commits a transaction left open, one the harness would have held."""
    psycopg_pool = pytest.importorskip("psycopg_pool")
    with (
        psycopg_pool.ConnectionPool(
            pin_dsn, min_size=1, max_size=1, kwargs={"autocommit": True}, open=False
        ) as real,
        psycopg.connect(pin_dsn, autocommit=True) as watcher,
    ):
        watcher.execute("truncate pin_jobs")
        with real.connection() as c:
            c.execute("begin")
            c.execute("insert into pin_jobs (id) values (7)")
            assert _ids(watcher) == []
        assert _ids(watcher) == [7]


def _closed(pool: PinnedSyncPool) -> bool:
    """`pool.closed`, read afresh: mypy keeps a property narrowed by an assert across the
    `with` that changes it, and would call what follows unreachable."""
    return pool.closed


def test_a_closed_pool_refuses_and_the_harness_connection_stays_open(
    conn: psycopg.Connection[Any],
) -> None:
    """close() refuses borrows with psycopg_pool's PoolClosed; the session lives on."""
    psycopg_pool = pytest.importorskip("psycopg_pool")
    pool = PinnedSyncPool(conn)
    with pool:
        assert not _closed(pool)
    assert _closed(pool)
    for borrow in (pool.getconn, pool.connection().__enter__, pool.wait):
        with pytest.raises(PoolClosed, match="'pinned' is already closed") as refused:
            borrow()
        assert isinstance(refused.value, psycopg_pool.PoolClosed)
    assert PoolClosed is pinned.PoolClosed  # one class for both pins
    assert not conn.closed
    assert conn.execute("select count(*) from pin_jobs").fetchone() == (3,)
    pool.open()
    pool.resize(4, 20)
    pool.wait()
    pool.check()
    pool.drain()
    with pool.connection() as c:
        PinnedSyncPool.check_connection(c)
        assert pool.get_stats()["pool_available"] == 0
    assert pool.get_stats()["pool_available"] == 1
    assert pool.pop_stats()["requests_num"] == 1
    assert pool.get_stats()["requests_num"] == 0
    with pytest.raises(ValueError, match="doesn't come from it"):
        pool.putconn(PinnedSyncConnection(conn))


def test_a_nested_borrow_shares_the_session_or_is_refused(conn: psycopg.Connection[Any]) -> None:
    """One session to lend: a nested borrow shares it, or, asked, raises NestedBorrow."""

    def nested(pool: PinnedSyncPool) -> list[int]:
        with pool.connection() as outer, pool.connection() as inner:
            return [
                outer.execute("select pg_backend_pid()").fetchone()[0],
                inner.execute("select pg_backend_pid()").fetchone()[0],
            ]

    assert nested(PinnedSyncPool(conn)) == [conn.info.backend_pid] * 2
    refusing = PinnedSyncPool(conn, nested="refuse")
    with pytest.raises(NestedBorrow, match="lends one session, and it is lent"):
        nested(refusing)
    assert NestedBorrow is pinned.NestedBorrow
    for _ in range(2):  # returned borrows are not nested
        with refusing.connection() as c:
            c.execute("select 1")
    with pytest.raises(ValueError, match="give 'share' or 'refuse'"):
        PinnedSyncPool(conn, nested="sometimes")


def test_kwargs_reflect_the_connections_autocommit(
    conn: psycopg.Connection[Any], pin_dsn: str
) -> None:
    """What a library reads before it opens transactions: `kwargs["autocommit"]`."""
    pool = PinnedSyncPool(conn, kwargs={"row_factory": dict_row, "prepare_threshold": None})
    assert pool.kwargs == {"row_factory": dict_row, "prepare_threshold": None, "autocommit": True}
    assert pool.conninfo == conn.info.dsn
    assert (pool.min_size, pool.max_size, pool.name) == (1, 1, "pinned")
    with pool.connection() as c:
        assert c.autocommit
        assert c.execute("select id from pin_jobs where id = 1").fetchone() == {"id": 1}
        c.autocommit = True
        with pytest.raises(psycopg.ProgrammingError, match="autocommit=True"):
            c.autocommit = False
    assert conn.execute("select 1").fetchone() == (1,)  # the harness's rows stay tuples
    with pytest.raises(ValueError, match="autocommit=False"):
        PinnedSyncPool(conn, kwargs={"autocommit": False})
    with psycopg.connect(pin_dsn) as plain:
        assert PinnedSyncPool(plain).kwargs == {"autocommit": False}


def test_a_cut_connection_raises_through_the_pin_and_is_not_replaced(
    pin_dsn: str, other: psycopg.Connection[Any]
) -> None:
    """A library's statement on a killed session raises; the next borrow lends the same
    dead session (no reconnect), so a retry loop cannot get out: it must give up."""
    victim = clock.connect(pin_dsn)
    try:
        pool = PinnedSyncPool(victim)
        other.execute("select pg_terminate_backend(%s)", (victim.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError), pool.connection() as c:
            c.execute("select 1")
        assert pool.conn.closed
        with pool.connection() as again:
            assert again is c and again.broken
            with pytest.raises(psycopg.OperationalError):
                again.execute("select 1")
    finally:
        victim.close()


def test_copy_stream_and_pipeline_run_on_the_harness_connection(
    conn: psycopg.Connection[Any],
) -> None:
    """psycopg's faces beyond execute, each on the one session, COPY's count spied."""
    pool = PinnedSyncPool(conn)
    with pool.connection() as c:
        cur = c.cursor()
        streamed = [row[0] for row in cur.stream("select id from pin_jobs order by id")]
        with cur.copy("copy pin_jobs (id) from stdin") as copy:
            copy.write_row((4,))
            copy.write_row((5,))
        copied = pool.last_rowcount
        with c.pipeline() as pipeline:
            c.execute("update pin_jobs set worker = 'p' where id = 5")
            pipeline.sync()
        row = c.execute("select worker, pg_backend_pid() from pin_jobs where id = 5").fetchone()
        with pytest.raises(NotImplementedError, match="cannot LISTEN"):
            c.notifies()
    assert streamed == [1, 2, 3] and copied == 2
    assert row == ("p", conn.info.backend_pid)
