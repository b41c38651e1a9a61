"""Create and drop the suite's own databases, and nothing else.

Every database the suite writes to is made here, carries a comment that marks it
as the suite's, and is dropped here. Names go through `psycopg.sql.Identifier`.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from leasecheck.dbfixtures.redact import Dsn

MARK = "leasecheck: throwaway test database, safe to drop"
PREFIX = "leasecheck_"


class DatabaseRefused(RuntimeError):
    """The server will not let the suite create its own database."""


def database_name(worker_id: str) -> str:
    """Return a fresh database name carrying the xdist worker id."""
    return f"{PREFIX}{worker_id}_{secrets.token_hex(4)}"


def with_database(dsn: str, dbname: str) -> str:
    """Return `dsn` pointed at another database on the same server (repr without password)."""
    return Dsn(make_conninfo(dsn, dbname=dbname))


def admin_dsn(dsn: str) -> str:
    """Return a DSN for the maintenance database (`postgres`) unless one is named."""
    params = conninfo_to_dict(dsn)
    return Dsn(dsn if params.get("dbname") else make_conninfo(dsn, dbname="postgres"))


def check_may_create(conn: psycopg.Connection[Any]) -> None:
    """Raise DatabaseRefused, with the fix in one line, unless the role may create databases."""
    can = conn.execute(
        "select rolcreatedb or rolsuper from pg_roles where rolname = current_user"
    ).fetchone()
    if not can or not can[0]:
        user = conn.info.user
        grant = sql.SQL("alter role {} createdb").format(sql.Identifier(user)).as_string(conn)
        raise DatabaseRefused(
            f"role {user!r} may not create databases; the suite only writes to databases "
            f"it creates: grant it CREATEDB ({grant}) or use another role"
        )


def create(dsn: str, name: str) -> str:
    """Create database `name` on the server of `dsn` and return a DSN for it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        check_may_create(conn)
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("comment on database {} is {}").format(sql.Identifier(name), sql.Literal(MARK))
        )
    return with_database(dsn, name)


def drop(dsn: str, name: str, unmarked: bool = False) -> None:
    """Drop database `name`, ending any session still connected to it.

    Refuses anything that is not one of the suite's own databases: named so and
    marked, or (`unmarked`) a name this process just made up, whose creation was
    interrupted before the mark.
    """
    if not name.startswith(PREFIX):
        raise ValueError(f"refusing to drop {name!r}: not a leasecheck database")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select shobj_description(oid, 'pg_database') from pg_database where datname = %s",
            (name,),
        ).fetchone()
        if row is None:
            return
        if row[0] != MARK and not (unmarked and row[0] is None):
            raise ValueError(f"refusing to drop {name!r}: it does not carry the leasecheck mark")
        conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


def leftovers(dsn: str) -> list[str]:
    """Return the names of suite databases that still exist on the server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "select datname from pg_database"
            " where shobj_description(oid, 'pg_database') = %s order by datname",
            (MARK,),
        ).fetchall()
    return [r[0] for r in rows]


_live: dict[str, str] = {}
"""The databases `temporary` holds in this process, with the DSN that drops them."""


@contextmanager
def temporary(server_dsn: str, label: str) -> Iterator[str]:
    """Yield a DSN for a fresh database of the suite's own named after `label`; drop it after."""
    admin = admin_dsn(server_dsn)
    name = database_name(label)
    try:  # an interrupt inside create() must not leave the database behind
        _live[name] = admin
        dsn = create(admin, name)
        yield dsn
    finally:
        _live.pop(name, None)
        drop(admin, name, unmarked=True)


def end_sessions() -> None:
    """Close the databases this process holds to new sessions and end the ones there.

    For an interrupted run whose calls go on (a lock wait, a machine's teardown that
    reconnects what it lost): each then fails at once, and the run's teardown goes
    on to drop the databases (from the maintenance database) as usual.
    """
    for name, admin in list(_live.items()):
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn,
        ):
            closed = sql.SQL("alter database {} with allow_connections false")
            conn.execute(closed.format(sql.Identifier(name)))
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = %s and pid <> pg_backend_pid()",
                (name,),
            )
