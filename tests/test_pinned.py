"""`leasecheck.adapters.pinned`: psycopg_pool's async pool, lending the harness's connection."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg.rows import dict_row

from leasecheck.adapters import _pinned, pinned_sync
from leasecheck.adapters.pinned import (
    NestedBorrow,
    PinnedConnection,
    PinnedCursor,
    PinnedPool,
    PoolClosed,
)

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture
def table(db: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The harness-style connection (autocommit, simulated time) with a scratch table."""
    db.execute("create temp table pinned_t (id int primary key, v text)")
    db.execute("insert into pinned_t values (1, 'a'), (2, 'b'), (3, 'c')")
    return db


def test_every_statement_runs_on_the_harness_connection(table: psycopg.Connection[Any]) -> None:
    """connection() and getconn() lend one connection, the harness's own backend."""
    pool = PinnedPool(table)
    own = table.info.backend_pid

    async def pids() -> list[int]:
        found = []
        async with pool.connection() as conn:
            cur = await conn.execute("select pg_backend_pid()")
            found.append((await cur.fetchone())[0])
        lent = await pool.getconn()
        async with lent.cursor() as cur:
            await cur.execute("select pg_backend_pid()")
            found.append((await cur.fetchone())[0])
        await pool.putconn(lent)
        return found

    assert _run(pids()) == [own, own]
    assert pool.conn.sync is table


def test_kwargs_are_psycopg_pools_and_say_autocommit(table: psycopg.Connection[Any]) -> None:
    """What saq reads (and sets) before it accepts a pool: `kwargs["autocommit"]`."""
    pool = PinnedPool(table)
    assert pool.kwargs == {"autocommit": True}
    pool.kwargs["autocommit"] = True  # saq's constructor does this
    assert PinnedPool(table, kwargs={"prepare_threshold": None}).kwargs == {
        "autocommit": True,
        "prepare_threshold": None,
    }
    assert pool.conninfo == table.info.dsn
    assert (pool.min_size, pool.max_size) == (1, 1)


def test_leaving_a_connection_neither_commits_nor_rolls_back(
    table: psycopg.Connection[Any],
) -> None:
    """Transactions stay the caller's: a block inside the harness's transaction leaves it open."""
    pool = PinnedPool(table)

    async def update() -> None:
        async with pool.connection() as conn:
            await conn.execute("update pinned_t set v = 'x' where id = 1")

    with table.transaction(force_rollback=True):
        _run(update())
        assert table.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert table.execute("select v from pinned_t where id = 1").fetchone() == ("x",)
    assert table.execute("select v from pinned_t where id = 1").fetchone() == ("a",)


def test_transactions_are_the_librarys_own(table: psycopg.Connection[Any]) -> None:
    """`async with conn.transaction()` commits, rolls back on error, nests as a savepoint."""
    pool = PinnedPool(table)

    async def inner(conn: PinnedConnection) -> None:
        async with conn.transaction():
            await conn.execute("update pinned_t set v = 'undone' where id = 2")
            raise RuntimeError("inner")

    async def work() -> None:
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("update pinned_t set v = 'kept' where id = 1")
            with pytest.raises(RuntimeError, match="inner"):
                await inner(conn)

    _run(work())
    rows = table.execute("select id, v from pinned_t where id < 3 order by id").fetchall()
    assert rows == [(1, "kept"), (2, "b")]


def test_the_pool_reports_the_last_statements_row_count(table: psycopg.Connection[Any]) -> None:
    """A library discards the row count; the pool keeps the latest one for the adapter."""
    pool = PinnedPool(table)
    assert (pool.last_status, pool.last_rowcount) == (None, -1)

    async def update(where: str) -> None:
        async with pool.connection() as conn:
            await conn.execute(f"update pinned_t set v = 'y' where {where}")

    _run(update("id > 1"))
    assert (pool.last_status, pool.last_rowcount) == ("UPDATE 2", 2)
    _run(update("id = 99"))
    assert (pool.last_status, pool.last_rowcount) == ("UPDATE 0", 0)


def test_cursors_take_psycopgs_arguments_and_iterate(table: psycopg.Connection[Any]) -> None:
    """row_factory, fetchone/fetchmany/fetchall, `async for`, description."""
    pool = PinnedPool(table)

    async def read() -> tuple[Any, ...]:
        async with pool.connection() as conn:
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute("select id, v from pinned_t order by id")
                first = await cur.fetchone()
                more = await cur.fetchmany(1)
                rest = await cur.fetchall()
                names = [c.name for c in cur.description]
            async with conn.cursor(row_factory=None) as cur:
                await cur.execute("select id from pinned_t order by id")
                ids = [row[0] async for row in cur]
            return first, more, rest, names, ids

    first, more, rest, names, ids = _run(read())
    assert first == {"id": 1, "v": "a"}
    assert more == [{"id": 2, "v": "b"}]
    assert rest == [{"id": 3, "v": "c"}]
    assert names == ["id", "v"]
    assert ids == [1, 2, 3]


def _closed(pool: PinnedPool) -> bool:
    """`pool.closed`, read afresh: mypy keeps a property narrowed by an assert across the
    `async with` that changes it, and would call what follows unreachable."""
    return pool.closed


def test_open_and_close_change_only_the_face(table: psycopg.Connection[Any]) -> None:
    """A closed pool lends nothing; the harness's connection stays open; open lends again."""
    pool = PinnedPool(table)

    async def cycle() -> bool:
        async with pool:
            assert not _closed(pool)
        assert _closed(pool)
        with pytest.raises(PoolClosed):
            async with pool.connection():
                pass
        await pool.open()
        await pool.resize(4, 20)
        await pool.wait()
        await pool.check()
        async with pool.connection() as conn:
            await PinnedPool.check_connection(conn)
        return _closed(pool)

    assert _run(cycle()) is False
    assert not table.closed
    assert pool.get_stats()["pool_available"] == 1
    assert pool.get_stats()["requests_num"] == 1
    assert pool.pop_stats()["requests_num"] == 1
    assert pool.get_stats()["requests_num"] == 0


def test_a_library_catching_psycopg_pools_pool_closed_catches_the_refusal(
    table: psycopg.Connection[Any],
) -> None:
    """The docstring's `PoolClosed` is psycopg_pool's own: a library's `except` sees it."""
    psycopg_pool = pytest.importorskip(
        "psycopg_pool", reason="psycopg_pool is not installed: no library catches its class"
    )
    pool = PinnedPool(table, name="lib")

    async def library_borrow() -> str:
        try:
            async with pool.connection() as conn:
                await conn.execute("select 1")
        except psycopg_pool.PoolClosed as refused:  # as a library built on psycopg_pool does
            return str(refused)
        return "lent"

    assert _run(library_borrow()) == "lent"
    _run(pool.close())
    assert _run(library_borrow()) == "the pool 'lib' is already closed"
    with pytest.raises(psycopg_pool.PoolClosed):
        _run(pool.getconn())
    assert issubclass(PoolClosed, psycopg_pool.PoolClosed)


def test_both_pins_raise_one_pool_closed_and_one_nested_borrow() -> None:
    """One class each, shared with the sync pin: an adapter catches either pin's refusal."""
    assert PoolClosed is pinned_sync.PoolClosed is _pinned.PoolClosed
    assert NestedBorrow is pinned_sync.NestedBorrow is _pinned.NestedBorrow
    assert issubclass(PoolClosed, psycopg.OperationalError)


def test_stats_say_whether_the_one_connection_is_lent(table: psycopg.Connection[Any]) -> None:
    """`pool_available` is 0 while the connection is out, as psycopg_pool would count it."""
    pool = PinnedPool(table)

    async def during() -> dict[str, int]:
        async with pool.connection():
            return pool.get_stats()

    assert _run(during())["pool_available"] == 0
    assert pool.get_stats() == {
        "pool_min": 1,
        "pool_max": 1,
        "pool_size": 1,
        "pool_available": 1,
        "requests_num": 1,
    }


def test_what_a_pinned_connection_cannot_do(table: psycopg.Connection[Any]) -> None:
    """LISTEN needs a connection of its own; the harness's autocommit mode is not changed."""
    conn = PinnedConnection(table)
    with pytest.raises(NotImplementedError, match="cannot LISTEN"):
        conn.notifies()
    _run(conn.set_autocommit(True))
    with pytest.raises(psycopg.ProgrammingError, match="autocommit=True"):
        _run(conn.set_autocommit(False))


def test_stream_copy_and_pipeline_run_on_the_harness_connection(
    table: psycopg.Connection[Any],
) -> None:
    """The faces psycopg's async connection has beyond execute: each on the one session."""
    pool = PinnedPool(table)

    async def use() -> tuple[list[Any], list[Any], int, list[Any]]:
        async with pool.connection() as conn:
            cur = conn.cursor()
            streamed = [row async for row in cur.stream("select id from pinned_t order by id")]
            async with cur.copy("copy pinned_t (id, v) from stdin") as copy:
                await copy.write_row((4, "d"))
                await copy.write_row((5, "e"))
            copied = pool.last_rowcount
            async with cur.copy("copy (select v from pinned_t order by id) to stdout") as out:
                rows = [row async for row in out.rows()]
            async with conn.pipeline() as pipeline:
                await conn.execute("update pinned_t set v = 'z' where id = 1")
                await pipeline.sync()
                done = await conn.execute("select v, pg_backend_pid() from pinned_t where id = 1")
            return streamed, rows, copied, [await done.fetchone()]

    streamed, rows, copied, [(v, pid)] = _run(use())
    assert streamed == [(1,), (2,), (3,)]
    assert copied == 2 and rows == [("a",), ("b",), ("c",), ("d",), ("e",)]
    assert v == "z" and pid == table.info.backend_pid


def test_a_nested_borrow_shares_the_session_or_is_refused(table: psycopg.Connection[Any]) -> None:
    """One session to lend: nested borrows share it (said in the docs), or, asked, raise."""

    async def nested(pool: PinnedPool) -> list[int]:
        async with pool.connection() as outer, pool.connection() as inner:
            a = await (await outer.execute("select pg_backend_pid()")).fetchone()
            b = await (await inner.execute("select pg_backend_pid()")).fetchone()
            return [a[0], b[0]]

    assert _run(nested(PinnedPool(table))) == [table.info.backend_pid] * 2
    refusing = PinnedPool(table, nested="refuse")
    with pytest.raises(NestedBorrow, match="lends one session, and it is lent"):
        _run(nested(refusing))

    async def one_after_another() -> None:
        for _ in range(2):
            async with refusing.connection() as conn:
                await conn.execute("select 1")

    _run(one_after_another())  # returned borrows are not nested
    with pytest.raises(ValueError, match="give 'share' or 'refuse'"):
        PinnedPool(table, nested="sometimes")


def test_the_old_private_name_still_imports() -> None:
    """Adapters written against `_pinned` keep working."""
    assert _pinned.PinnedPool is PinnedPool
    assert _pinned.PinnedConnection is PinnedConnection
    assert _pinned.PinnedCursor is PinnedCursor
