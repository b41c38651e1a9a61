"""With `--leasecheck-pg-dsn` the suite creates and drops only its own databases, and says so
when it cannot.

A child session runs real suite tests against this session's server as a role made
for the purpose, aimed at a canary database that is not the suite's. Afterwards the
canary is as it was and the role owns no database; a role without CREATEDB is
refused in one line before anything is created.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests import child


@pytest.fixture
def role(leasecheck_server_dsn: str) -> Iterator[tuple[str, str]]:
    """Return (name, password) of a fresh login role on the server; drop it after."""
    name, password = f"lc_safety_{secrets.token_hex(4)}", secrets.token_hex(12)
    with psycopg.connect(leasecheck_server_dsn, autocommit=True) as conn:
        may = conn.execute(
            "select rolcreaterole or rolsuper from pg_roles where rolname = current_user"
        ).fetchone()
        if not may or not may[0]:
            pytest.skip("the server's role may not create roles (CREATEROLE), so none is tried")
        conn.execute(
            sql.SQL("create role {} login password {}").format(
                sql.Identifier(name), sql.Literal(password)
            )
        )
    try:
        yield name, password
    finally:
        with psycopg.connect(leasecheck_server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop role {}").format(sql.Identifier(name)))


@pytest.fixture
def canary(leasecheck_server_dsn: str, role: tuple[str, str]) -> Iterator[str]:
    """Return a DSN for a database that is not the suite's, with a table the role may write."""
    name = f"canary_{secrets.token_hex(4)}"
    with psycopg.connect(leasecheck_server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    dsn = make_conninfo(leasecheck_server_dsn, dbname=name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create table canary (id int primary key, note text not null)")
            conn.execute("insert into canary select n, 'row ' || n from generate_series(1, 5) n")
            conn.execute(
                sql.SQL("grant all on schema public to {}").format(sql.Identifier(role[0]))
            )
            conn.execute(sql.SQL("grant all on canary to {}").format(sql.Identifier(role[0])))
        yield dsn
    finally:
        with psycopg.connect(leasecheck_server_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def _fingerprint(dsn: str) -> dict[str, Any]:
    """Return what a stray write would change: rows, objects, and the database's comment."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            "rows": conn.execute("select id, note from canary order by id").fetchall(),
            "objects": conn.execute(
                "select n.nspname, c.relname, c.relkind from pg_class c"
                " join pg_namespace n on n.oid = c.relnamespace"
                " where n.nspname not in ('pg_catalog', 'information_schema', 'pg_toast')"
                " order by 1, 2"
            ).fetchall(),
            "functions": conn.execute(
                "select n.nspname, p.proname from pg_proc p"
                " join pg_namespace n on n.oid = p.pronamespace"
                " where n.nspname not in ('pg_catalog', 'information_schema') order by 1, 2"
            ).fetchall(),
            "comment": conn.execute(
                "select shobj_description(oid, 'pg_database') from pg_database"
                " where datname = current_database()"
            ).fetchone(),
        }


def _owned_databases(server_dsn: str, role: str) -> list[str]:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "select datname from pg_database d join pg_roles r on r.oid = d.datdba"
            " where r.rolname = %s order by 1",
            (role,),
        ).fetchall()
    return [r[0] for r in rows]


def test_a_session_on_your_server_touches_only_its_own_databases(
    leasecheck_server_dsn: str, role: tuple[str, str], canary: str, tmp_path: Path
) -> None:
    """Real suite tests run with --leasecheck-pg-dsn at a canary database: the canary stays
    as it was."""
    name, password = role
    with psycopg.connect(leasecheck_server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("alter role {} createdb").format(sql.Identifier(name)))
    before = _fingerprint(canary)
    assert len(before["rows"]) == 5
    dsn = make_conninfo(canary, user=name, password=password)
    done = child.run(
        child.command(
            "tests/test_reference_queue.py", "-p", "no:randomly", "--leasecheck-pg-dsn", dsn
        ),
        tmp_path / "tmp",
    )
    assert done.returncode == 0, done.output
    assert " passed" in done.lines[-1], done.output
    assert _fingerprint(canary) == before
    assert _owned_databases(leasecheck_server_dsn, name) == [], "the session left a database behind"


def test_a_role_without_createdb_is_refused_in_one_line(
    leasecheck_server_dsn: str, role: tuple[str, str], tmp_path: Path
) -> None:
    """The refusal comes once, before any test, names the fix, and nothing is created."""
    name, password = role
    dsn = make_conninfo(leasecheck_server_dsn, user=name, password=password)
    (tmp_path / "test_nothing.py").write_text("def test_nothing(leasecheck_database):\n    pass\n")
    done = child.run(
        child.command("test_nothing.py", "--leasecheck-pg-dsn", dsn, rootdir=tmp_path),
        tmp_path / "tmp",
        cwd=tmp_path,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.output
    assert len(done.lines) == 1, done.output
    assert f"role {name!r} may not create databases" in done.lines[0]
    assert f'alter role "{name}" createdb' in done.lines[0]
    assert _owned_databases(leasecheck_server_dsn, name) == []
