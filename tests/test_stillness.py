"""Autovacuum stays off the tables of the databases the suite creates: an ANALYZE at a
moment the clock picks would change plans mid-run, and a replayed example would meet
other plans than the run did (Hypothesis reports that as a flaky strategy)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from leasecheck.dbfixtures import janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock

USER_TABLES = """
select n.nspname || '.' || c.relname, c.reloptions, t.reloptions
  from pg_class c
  join pg_namespace n on n.oid = c.relnamespace
  left join pg_class t on t.oid = c.reltoastrelid
 where c.relkind = 'r' and n.nspname not in ('pg_catalog', 'information_schema')
 order by 1
"""


class _WithExtraTables(ReferenceQueue):
    """The reference plus a table in a schema of its own and a materialized view."""

    def install(self, conn: psycopg.Connection[Any]) -> None:
        super().install(conn)
        conn.execute("create schema side; create table side.log (line text)")
        conn.execute("create materialized view side.counts as select count(*) from jobs")


def test_prepare_turns_autovacuum_off_on_every_table(
    leasecheck_server_dsn: str, leasecheck_worker_label: str
) -> None:
    """After `prepare`, every table (the queue's, the harness's, one in a schema of the
    queue's own, and their TOAST tables) and the materialized view say autovacuum off."""
    label = f"{leasecheck_worker_label}_still"
    with janitor.temporary(leasecheck_server_dsn, label) as dsn:
        clock.prepare(dsn, _WithExtraTables())
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(USER_TABLES).fetchall()
            view = conn.execute(
                "select reloptions from pg_class where oid = 'side.counts'::regclass"
            ).fetchone()
    names = [name for name, _, _ in rows]
    assert {"public.jobs", "public.receipts", "leasecheck.clock_moves", "side.log"} <= set(names)
    for name, options, toast in rows:
        assert "autovacuum_enabled=false" in (options or []), name
        if toast is not None:
            assert "autovacuum_enabled=false" in toast, f"{name}'s TOAST table"
    assert view is not None and "autovacuum_enabled=false" in view[0]


def test_embedded_server_runs_without_autovacuum(
    pytestconfig: pytest.Config, leasecheck_server_dsn: str
) -> None:
    """The embedded server (CI's) starts no autovacuum worker at all."""
    where = str(pytestconfig.getoption("--leasecheck-pg"))
    if pytestconfig.getoption("--leasecheck-pg-dsn") or not where.startswith("embedded"):
        pytest.skip("the server is not the embedded one: its autovacuum setting is its own")
    with psycopg.connect(leasecheck_server_dsn, autocommit=True) as conn:
        row = conn.execute("select setting from pg_settings where name = 'autovacuum'").fetchone()
    assert row == ("off",)
