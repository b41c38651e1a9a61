"""The stepping proxy with real clients (psycopg, libpq) on this worker's database.

Each client call runs on a thread of its own, as a worker's would; the test is the
controller: it sees sessions held, releases them one round trip at a time, and cuts.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import errors

from leasecheck.proxy import Endpoint, NotHeld, Proxy, Session

T = TypeVar("T")
WAIT = 10.0
CLIENT = "proxy-test-client"


@pytest.fixture
def proxy(leasecheck_database: str) -> Iterator[Proxy]:
    """Return a started proxy to this worker's database; it must end with no error."""
    with Proxy(leasecheck_database) as p:
        yield p
    assert p.errors == []


@pytest.fixture
def direct(leasecheck_database: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a connection straight to the server, around the proxy."""
    with psycopg.connect(leasecheck_database, autocommit=True) as conn:
        yield conn


@pytest.fixture
def table(direct: psycopg.Connection[Any]) -> Iterator[str]:
    """Return the name of an empty table of this module's own."""
    direct.execute("drop table if exists proxy_rows")
    direct.execute("create table proxy_rows (id int primary key, note text)")
    yield "proxy_rows"
    direct.execute("drop table proxy_rows")


def in_thread(call: Callable[[], T]) -> Future[T]:
    """Run `call` on a thread of its own, as a worker's client call runs."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name=CLIENT, daemon=True).start()
    return future


def proxy_threads(before: set[threading.Thread]) -> set[threading.Thread]:
    """Return the threads started since `before`, but for the clients' own."""
    return {t for t in threading.enumerate() if t not in before and t.name != CLIENT}


def connect(endpoint: Endpoint, base: str, **kwargs: Any) -> psycopg.Connection[Any]:
    return psycopg.connect(endpoint.dsn(base), autocommit=True, **kwargs)


def step_through(proxy: Proxy, endpoint: Endpoint, call: Future[Any]) -> list[str | None]:
    """Release every unit `endpoint` holds, one at a time, until `call` returns; return
    the statements released, in order (the controller's loop the harness will run)."""
    call.add_done_callback(lambda _: proxy.poke())
    released: list[str | None] = []
    held: list[Session] = []

    def ready() -> bool:
        held[:] = [s for s in endpoint.sessions() if s.state == "held"]
        return bool(held) or call.done()

    while True:
        proxy.wait_until(ready, WAIT, "a held unit or the end of the call")
        if not held:
            return released
        released.append(held[0].statement)
        held[0].release()


def test_a_free_endpoint_passes_queries_and_a_stepped_one_holds_them(
    proxy: Proxy, leasecheck_database: str
) -> None:
    """Free: a query runs at once. Stepped: it waits at the gate, its client blocked,
    until release(); a release with nothing held says so; setting the endpoint free
    lets a held unit go."""
    endpoint = proxy.endpoint("w0")
    with connect(endpoint, leasecheck_database) as conn:
        assert conn.execute("select 40 + 2").fetchone() == (42,)
        [session] = endpoint.sessions()
        assert session.backend_pid == conn.info.backend_pid
        proxy.wait_until(lambda: session.state == "idle", WAIT, "the session idle")
        passed = session.units_passed
        endpoint.stepped = True
        call = in_thread(lambda: conn.execute("select 'stepped'").fetchone())
        assert endpoint.wait_held(WAIT) is session
        assert session.state == "held"
        assert session.statement == "select 'stepped'"
        assert not call.done()
        assert session.units_passed == passed
        session.release()
        assert call.result(WAIT) == ("stepped",)
        assert session.units_passed == passed + 1
        proxy.wait_until(lambda: session.state == "idle", WAIT, "the session idle")
        with pytest.raises(NotHeld, match="holds no unit"):
            session.release()
        freed = in_thread(lambda: conn.execute("select 'freed'").fetchone())
        endpoint.wait_held(WAIT)
        endpoint.stepped = False
        assert freed.result(WAIT) == ("freed",)


def test_the_extended_protocol_with_parameters_prepared_and_binary(
    proxy: Proxy, leasecheck_database: str
) -> None:
    """Parameters, a server-side prepared statement reused by name, binary results:
    every round trip held and released; a Bind of the prepared statement is told by
    the query it was prepared from."""
    endpoint = proxy.endpoint("w0")
    endpoint.stepped = True
    sql = "select %s::int * 2, %s::text || '!', %s::bytea"

    def calls() -> list[Any]:
        with connect(endpoint, leasecheck_database) as conn:
            cur = conn.cursor(binary=True)
            return [
                cur.execute(sql, (n, f"n{n}", bytes([n])), prepare=True).fetchone()
                for n in (1, 2, 3)
            ]

    call = in_thread(calls)
    released = step_through(proxy, endpoint, call)
    assert call.result(WAIT) == [(2, "n1!", b"\x01"), (4, "n2!", b"\x02"), (6, "n3!", b"\x03")]
    prepared = "select $1::int * 2, $2::text || '!', $3::bytea"
    assert released.count(prepared) >= 3, released


def test_a_pipeline_is_held_and_released_one_sync_at_a_time(
    proxy: Proxy, leasecheck_database: str, table: str
) -> None:
    """psycopg's pipeline sends three synced units before it reads: the proxy shows
    them one at a time, each only once the previous one's answer reached the client."""
    endpoint = proxy.endpoint("w0")
    conn = connect(endpoint, leasecheck_database)
    endpoint.stepped = True
    statements = [f"insert into {table} values ({n}, 'p') returning id * 10" for n in (1, 2, 3)]

    def pipeline() -> list[Any]:
        cursors = []
        with conn.pipeline() as p:
            for sql in statements:
                cursors.append(conn.execute(sql))
                p.sync()
        return [c.fetchone() for c in cursors]

    try:
        call = in_thread(pipeline)
        [session] = endpoint.sessions()
        for n, sql in enumerate(statements):
            assert endpoint.wait_held(WAIT) is session
            assert session.statement == sql
            assert session.units_passed == n
            assert not call.done()
            session.release()
        closing = step_through(proxy, endpoint, call)
        assert set(closing) <= {None}, "only the pipeline's closing Sync, no statement"
        assert call.result(WAIT) == [(10,), (20,), (30,)]
    finally:
        endpoint.stepped = False
        conn.close()


LIBPQ_COPY = """
import sys
from psycopg import pq

conn = pq.PGconn.connect(sys.argv[1].encode())
if conn.status != pq.ConnStatus.OK:
    sys.exit(conn.get_error_message())
started = conn.exec_params(f"copy {sys.argv[2]} from stdin".encode(), [])
conn.put_copy_data(b"101\\tlibpq\\n")
conn.put_copy_end()
ended = conn.get_result()
rest = conn.get_result()
statuses = (started.status, ended and ended.status, rest)
if statuses != (pq.ExecStatus.COPY_IN, pq.ExecStatus.COMMAND_OK, None):
    sys.exit(f"statuses {statuses}: {conn.get_error_message()}")
conn.finish()
"""
"""libpq's blocking calls, which keep the GIL while they wait: in a process of its own,
or the proxy's loop thread could not run to answer them."""


def test_copy_from_stdin_and_to_stdout_through_a_stepped_endpoint(
    proxy: Proxy, leasecheck_database: str, table: str, direct: psycopg.Connection[Any]
) -> None:
    """A COPY is one round trip: once released, its data flows both ways unheld (the
    call ends with no second release); so does libpq's extended-protocol COPY."""
    endpoint = proxy.endpoint("w0")
    conn = connect(endpoint, leasecheck_database)
    endpoint.stepped = True
    try:

        def copy_in() -> None:
            with conn.cursor().copy(f"copy {table} from stdin") as copy:
                for n in range(1, 101):
                    copy.write_row((n, f"row {n}"))

        call = in_thread(copy_in)
        endpoint.wait_held(WAIT).release()
        call.result(WAIT)
        assert direct.execute(f"select count(*), sum(id) from {table}").fetchone() == (100, 5050)

        def copy_out() -> list[tuple[Any, ...]]:
            with conn.cursor().copy(f"copy (select * from {table} order by id) to stdout") as c:
                return list(c.rows())

        call_out = in_thread(copy_out)
        endpoint.wait_held(WAIT).release()
        rows = call_out.result(WAIT)
        assert len(rows) == 100
        assert rows[-1] == ("100", "row 100")
    finally:
        endpoint.stepped = False
        conn.close()

    endpoint.stepped = True
    child = subprocess.Popen(
        [sys.executable, "-c", LIBPQ_COPY, endpoint.dsn(leasecheck_database), table],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        endpoint.wait_held(WAIT).release()
        _, failure = child.communicate(timeout=WAIT)
    finally:
        child.kill()
        child.wait()
        endpoint.stepped = False
    assert child.returncode == 0, failure
    assert direct.execute(f"select note from {table} where id = 101").fetchone() == ("libpq",)


def test_a_notification_reaches_an_idle_listener(
    proxy: Proxy, leasecheck_database: str, direct: psycopg.Connection[Any]
) -> None:
    """NOTIFY from another session reaches a proxied LISTEN while it holds nothing."""
    endpoint = proxy.endpoint("listener")
    endpoint.stepped = True
    with connect(endpoint, leasecheck_database) as conn:
        call = in_thread(lambda: conn.execute("listen proxy_channel"))
        endpoint.wait_held(WAIT).release()
        call.result(WAIT)
        [session] = endpoint.sessions()
        proxy.wait_until(lambda: session.state == "idle", WAIT, "the listener idle")
        direct.execute("notify proxy_channel, 'hello'")
        got = list(conn.notifies(timeout=WAIT, stop_after=1))
        assert [(n.channel, n.payload) for n in got] == [("proxy_channel", "hello")]
        assert session.state == "idle"


def test_wait_quiet_sees_a_lock_wait(
    proxy: Proxy, leasecheck_database: str, table: str, direct: psycopg.Connection[Any]
) -> None:
    """A session whose UPDATE waits on another's row lock is quiet ("blocked", naming
    the holder), not hanging; once the holder commits, the update finishes."""
    direct.execute(f"insert into {table} values (1, 'old')")
    holder_end, waiter_end = proxy.endpoint("holder"), proxy.endpoint("waiter")
    waiter_end.stepped = True
    holder = connect(holder_end, leasecheck_database)
    waiter = connect(waiter_end, leasecheck_database)
    holder.execute("begin")
    holder.execute(f"select * from {table} where id = 1 for update")
    call = in_thread(lambda: waiter.execute(f"update {table} set note = 'new' where id = 1"))
    try:
        held = waiter_end.wait_held(WAIT)
        [before] = proxy.wait_quiet(["waiter"], WAIT)
        assert before.state == "held"
        held.release()
        quiet = {s.session.name: s for s in proxy.wait_quiet(["holder", "waiter"], WAIT)}
        assert quiet["waiter"].state == "blocked"
        assert quiet["waiter"].blocked_by == (holder.info.backend_pid,)
        assert quiet["holder"].state == "idle"
        assert not call.done()
        holder.execute("commit")
        call.result(WAIT)
        [after] = proxy.wait_quiet(["waiter"], WAIT)
        assert after.state == "idle"
    finally:
        holder.close()
        waiter_end.stepped = False
        with contextlib.suppress(Exception):
            call.result(WAIT)
        waiter.close()
    assert direct.execute(f"select note from {table}").fetchone() == ("new",)


def test_passes_let_a_call_run_its_first_round_trips_and_hold_the_next(
    proxy: Proxy, leasecheck_database: str, table: str, direct: psycopg.Connection[Any]
) -> None:
    """let_pass(2): a transaction's BEGIN and INSERT go by unheld, its COMMIT waits at the
    gate with the transaction open (and its row lock held); set free, it commits."""
    endpoint = proxy.endpoint("w0")
    conn = connect(endpoint, leasecheck_database)
    endpoint.stepped = True
    endpoint.let_pass(2)

    def transaction() -> None:
        conn.execute("begin")
        conn.execute(f"insert into {table} values (9, 'passed')")
        conn.execute("commit")

    try:
        call = in_thread(transaction)
        session = endpoint.wait_held(WAIT)
        assert (session.statement, session.units_passed) == ("commit", 2)
        assert session.in_transaction
        assert not call.done()
        assert direct.execute(f"select count(*) from {table}").fetchone() == (0,)
        endpoint.stepped = False
        call.result(WAIT)
        proxy.wait_until(lambda: not session.in_transaction, WAIT, "the commit's answer")
    finally:
        conn.close()
    assert direct.execute(f"select note from {table} where id = 9").fetchone() == ("passed",)
    with pytest.raises(ValueError, match="at least 0"):
        endpoint.let_pass(-1)


def test_a_cut_commits_but_the_client_loses_the_answer(
    proxy: Proxy, leasecheck_database: str, table: str, direct: psycopg.Connection[Any]
) -> None:
    """Cut at the COMMIT: the server commits, the client sees only a lost connection."""
    endpoint = proxy.endpoint("w0")
    endpoint.stepped = True
    conn = connect(endpoint, leasecheck_database)

    def transaction() -> None:
        conn.execute("begin")
        conn.execute(f"insert into {table} values (7, 'cut')")
        conn.execute("commit")

    try:
        call = in_thread(transaction)
        for _ in range(2):
            endpoint.wait_held(WAIT).release()
        session = endpoint.wait_held(WAIT)
        assert session.statement == "commit"
        session.cut(WAIT)
        assert session.state == "closed"
        with pytest.raises(psycopg.OperationalError):
            call.result(WAIT)
    finally:
        conn.close()
    assert direct.execute(f"select note from {table} where id = 7").fetchone() == ("cut",)
    assert endpoint.sessions() == []


def test_a_kill_drops_the_held_unit_unrun(
    proxy: Proxy, leasecheck_database: str, table: str, direct: psycopg.Connection[Any]
) -> None:
    """Kill closes both sides at once: the held statement never reaches the server."""
    endpoint = proxy.endpoint("w0")
    endpoint.stepped = True
    conn = connect(endpoint, leasecheck_database)
    try:
        call = in_thread(lambda: conn.execute(f"insert into {table} values (8, 'killed')"))
        endpoint.wait_held(WAIT).kill(WAIT)
        with pytest.raises(psycopg.OperationalError):
            call.result(WAIT)
    finally:
        conn.close()
    assert direct.execute(f"select count(*) from {table}").fetchone() == (0,)


def test_a_cancel_through_the_proxy_cancels(
    proxy: Proxy, leasecheck_database: str, direct: psycopg.Connection[Any]
) -> None:
    """The client's CancelRequest, on a connection of its own, reaches the server.

    `cancel_safe`, not `cancel`: libpq's blocking PQcancel keeps the GIL while it waits
    for the proxy, whose loop runs on a thread of this same process."""
    endpoint = proxy.endpoint("w0")
    with connect(endpoint, leasecheck_database) as conn:
        pid = conn.info.backend_pid
        call = in_thread(lambda: conn.execute("select pg_sleep(60)"))
        sleeping = "select count(*) from pg_stat_activity where pid = %s and wait_event = 'PgSleep'"
        for _ in range(10_000):
            if direct.execute(sleeping, (pid,)).fetchone() == (1,):
                break
        else:
            pytest.fail("the backend never started to sleep")
        conn.cancel_safe(timeout=WAIT)
        with pytest.raises(errors.QueryCanceled):
            call.result(WAIT)
        assert conn.execute("select 1").fetchone() == (1,)
        assert [s.backend_pid for s in endpoint.all_sessions()] == [pid]


def test_close_leaves_no_thread_no_socket_and_no_backend(
    leasecheck_database: str, direct: psycopg.Connection[Any]
) -> None:
    """close() ends the loop's thread, the listening sockets, the clients' sockets
    (even one left open), and every server connection (their backends exit)."""
    before = set(threading.enumerate())
    proxy = Proxy(leasecheck_database).start()
    endpoints = [proxy.endpoint("w0"), proxy.endpoint("w1")]
    clients = [connect(e, leasecheck_database) for e in endpoints]
    pids = [c.info.backend_pid for c in clients]
    endpoints[1].stepped = True
    held = in_thread(lambda: clients[1].execute("select 'never'"))
    endpoints[1].wait_held(WAIT)
    assert proxy_threads(before)
    proxy.close()
    assert proxy_threads(before) == set()
    with pytest.raises(psycopg.OperationalError):
        held.result(WAIT)
    with pytest.raises(psycopg.OperationalError):
        clients[0].execute("select 1")
    for client in clients:
        client.close()
    for endpoint in endpoints:
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(endpoint.dsn(leasecheck_database), connect_timeout=5).close()
    alive = "select count(*) from pg_stat_activity where pid = any(%s)"
    for _ in range(10_000):
        if direct.execute(alive, (pids,)).fetchone() == (0,):
            break
    else:
        pytest.fail(f"backends {pids} still alive after close()")
    assert proxy.errors == []
