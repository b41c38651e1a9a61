"""Django's ORM on the harness's connection (leasecheck.adapters.django), on a real server.

Every statement goes to the connection handed over, Django's transactions are the
connection's `transaction()`, the connection is never committed behind the holder's
back, closed, or reconfigured, and Django reads values as it does on its own
connections.
"""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

pytest.importorskip("django", reason="Django is not installed: pip install 'django>=5.2,<6'")

from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections, transaction
from django.db.backends.postgresql.psycopg_any import get_adapters_template
from django.db.utils import OperationalError
from django.utils import timezone
from psycopg import adapters as psycopg_adapters
from psycopg.pq import Format

from leasecheck.adapters.django import django_clock, psycopg_errors, use_connection
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock
from tests import django_fixtures

django_fixtures.configure()


@pytest.fixture(scope="module")
def django_dsn(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a DSN for a database of this module's own, with a table to write to."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_django") as dsn:
        with clock.connect(dsn) as conn:
            clock.install(conn)
            conn.execute("create table note (body text)")
        yield dsn


@pytest.fixture
def conn(django_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a connection as the harness hands them out: autocommit, simulated time."""
    with clock.connect(django_dsn) as c:
        c.execute("truncate note")
        yield c


def _notes(conn: psycopg.Connection[Any]) -> list[str]:
    return [str(r[0]) for r in conn.execute("select body from note order by body")]


def _write(body: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("insert into note values (%s)", [body])


def _write_and_fail(body: str) -> None:
    """Write in an atomic block that then raises."""
    with transaction.atomic():
        _write(body)
        raise RuntimeError("the block fails")


def test_every_statement_runs_on_the_connection_handed_over(
    conn: psycopg.Connection[Any],
) -> None:
    """Django's cursor is on the harness's backend, and sees the harness's search path."""
    with use_connection(conn), connection.cursor() as cursor:
        cursor.execute("select pg_backend_pid(), current_setting('search_path')")
        pid, path = cursor.fetchone()
    assert pid == conn.info.backend_pid
    assert path == clock.SEARCH_PATH.replace(" ", "")


def test_outside_use_connection_django_opens_nothing() -> None:
    """With the engine in DATABASES, Django code outside the block raises and says why."""
    with pytest.raises(ImproperlyConfigured, match="use_connection"), connection.cursor():
        pass


def test_an_atomic_block_is_the_connections_transaction(conn: psycopg.Connection[Any]) -> None:
    """Committed on leaving, rolled back on an error; the connection is idle afterwards."""
    with use_connection(conn):
        with transaction.atomic():
            _write("kept")
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        with pytest.raises(RuntimeError):
            _write_and_fail("dropped")
    assert _notes(conn) == ["kept"]
    assert conn.autocommit
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_nested_atomic_blocks_use_savepoints(conn: psycopg.Connection[Any]) -> None:
    """An inner block that fails takes back only its own writes."""
    with use_connection(conn), transaction.atomic():
        _write("outer")
        with pytest.raises(RuntimeError):
            _write_and_fail("inner")
    assert _notes(conn) == ["outer"]


def test_inside_a_held_transaction_nothing_is_committed(conn: psycopg.Connection[Any]) -> None:
    """Django's commit inside the holder's transaction is a savepoint: the holder decides."""
    with conn.transaction() as held:
        with use_connection(conn):
            with transaction.atomic():
                _write("by django")
            _write("in autocommit, as django thinks")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert _notes(conn) == ["by django", "in autocommit, as django thinks"]
        raise psycopg.Rollback(held)
    assert _notes(conn) == []


def test_closing_never_closes_the_connection(conn: psycopg.Connection[Any]) -> None:
    """Django's close() lets go; the alias is what it was before the block."""
    before = connections["default"]
    with use_connection(conn) as wrapper:
        assert connections["default"] is wrapper
        _write("one")
        connection.close()
        _write("two")
    assert connections["default"] is before
    assert not conn.closed
    assert _notes(conn) == ["one", "two"]


def test_an_open_transaction_is_rolled_back_on_the_way_out(conn: psycopg.Connection[Any]) -> None:
    """Manual transaction management left open at the end of the block does not leak."""
    with use_connection(conn):
        transaction.set_autocommit(False)
        _write("never committed")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _notes(conn) == []


def test_session_settings_stay_the_harness_s(conn: psycopg.Connection[Any]) -> None:
    """No SET TIME ZONE (Django's own backend would, for a server in Etc/UTC), no SET ROLE."""
    conn.execute("set time zone 'America/New_York'")
    settings_before = conn.execute("select current_setting('TimeZone'), current_user").fetchone()
    with use_connection(conn), connection.cursor() as cursor:
        cursor.execute("select timestamptz '2030-01-01 12:00:00+00'")
        (read,) = cursor.fetchone()
    assert conn.execute("select current_setting('TimeZone'), current_user").fetchone() == (
        settings_before
    )
    assert read == datetime.datetime(2030, 1, 1, 12, tzinfo=datetime.UTC)
    assert read.utcoffset() == datetime.timedelta(0)


def test_json_reads_as_django_reads_it_and_the_connection_keeps_its_own(
    conn: psycopg.Connection[Any],
) -> None:
    """Django's loaders are the cursor's: jsonb is text for Django, a dict for the harness."""
    with use_connection(conn), connection.cursor() as cursor:
        cursor.execute("""select '{"a": 1}'::jsonb""")
        (django_reads,) = cursor.fetchone()
    (harness_reads,) = conn.execute("""select '{"a": 1}'::jsonb""").fetchone()  # type: ignore[misc]
    assert isinstance(django_reads, str) and json.loads(django_reads) == {"a": 1}
    assert harness_reads == {"a": 1}


def test_cursors_load_what_djangos_own_connections_load(conn: psycopg.Connection[Any]) -> None:
    """Every type's loader is the one Django's adapters template gives (but timestamptz's,
    which converts instead of relabelling): a Django upgrade that adds one shows here."""
    template = get_adapters_template(True, datetime.UTC)
    with use_connection(conn), connection.cursor() as cursor:
        ours = cursor.cursor.adapters
        for info in psycopg_adapters.types:
            if info.name == "timestamptz":
                continue
            for fmt in (Format.TEXT, Format.BINARY):
                assert ours.get_loader(info.oid, fmt) is template.get_loader(info.oid, fmt), (
                    info.name,
                    fmt,
                )


def test_psycopg_errors_hands_the_harness_its_own_error(conn: psycopg.Connection[Any]) -> None:
    """A terminated backend surfaces as psycopg's OperationalError, not Django's wrapper."""
    with clock.connect(conn.info.dsn) as monitor:
        monitor.execute("select pg_terminate_backend(%s)", [conn.info.backend_pid])
    with pytest.raises(OperationalError), use_connection(conn):
        _write("lost")
    with pytest.raises(psycopg.OperationalError), psycopg_errors(), use_connection(conn):
        _write("lost")


def test_each_thread_gets_its_own_binding(conn: psycopg.Connection[Any], django_dsn: str) -> None:
    """Django keeps a backend per thread: a block on one thread binds only that thread."""
    seen: list[int] = []
    with clock.connect(django_dsn) as other, use_connection(conn):

        def elsewhere() -> None:
            with use_connection(other), connection.cursor() as cursor:
                cursor.execute("select pg_backend_pid()")
                seen.append(cursor.fetchone()[0])

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        with connection.cursor() as cursor:
            cursor.execute("select pg_backend_pid()")
            seen.append(cursor.fetchone()[0])
        assert seen == [other.info.backend_pid, conn.info.backend_pid]


def test_djangos_clock_answers_simulated_now_in_the_block(conn: psycopg.Connection[Any]) -> None:
    """timezone.now() is the connection's now() inside, read once; the real clock outside."""
    clock.advance(conn, datetime.timedelta(seconds=42))
    with django_clock(conn) as at:
        assert timezone.now() == at == clock.EPOCH + datetime.timedelta(seconds=42)
        assert timezone.now().tzinfo == datetime.UTC
        clock.advance(conn, datetime.timedelta(seconds=1))
        assert timezone.now() == at  # read once: the call's instant
    assert abs(timezone.now() - datetime.datetime.now(datetime.UTC)) < datetime.timedelta(minutes=1)
    clock.reset(conn)


def test_djangos_clock_is_per_thread(conn: psycopg.Connection[Any]) -> None:
    """Another thread's Django keeps the real clock while this one's block runs."""
    seen: list[datetime.datetime] = []
    with django_clock(conn) as at:
        thread = threading.Thread(target=lambda: seen.append(timezone.now()))
        thread.start()
        thread.join()
        assert timezone.now() == at
    real = datetime.datetime.now(datetime.UTC)
    assert abs(seen[0] - real) < datetime.timedelta(minutes=1)
