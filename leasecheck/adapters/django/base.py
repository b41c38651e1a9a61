"""The database backend: Django's PostgreSQL backend on a connection the harness owns.

`DatabaseWrapper` is `django.db.backends.postgresql`'s, with what touches the
connection itself replaced, so that Django's ORM, its transactions and its
migrations run on the harness's psycopg connection exactly as it was handed over:

- Connecting adopts the connection `adopt(conn)` names (`use_connection` does that
  for one call); it never opens one. Without one, it raises and says to wrap the code
  in `use_connection`, so nothing in the process reaches the database another way.
- Closing lets go of the connection and never closes it; `pool` is never used.
- Django's transactions are psycopg's `conn.transaction()`, as the contract asks:
  what Django calls turning autocommit off (the outermost `atomic` block) enters
  one, its commit and rollback leave it. Inside a transaction the harness holds
  open that block is a savepoint, so Django never commits what the harness opened.
  Django's own savepoints inside it are its usual `SAVEPOINT` statements.
- Session settings stay the harness's: no `SET TIME ZONE`, `SET ROLE` or isolation
  level (its search path, and with it simulated time, stays as it was). Django reads
  `timestamptz` values converted to its time zone instead of relabelled, which is
  what its own loader does when the session's zone is Django's; with `USE_TZ =
  False` (naive datetimes, written in the session's zone) the session's zone must be
  `TIME_ZONE`, and connecting says so otherwise.
- Cursors are Django's own classes (`Cursor`, client-side binding, or
  `ServerBindingCursor` with `OPTIONS["server_side_binding"]`) on the harness's
  connection, each with the loaders and dumpers Django's adapters template
  (`psycopg_any.get_adapters_template`) gives its own connections: `jsonb`, `inet`
  and `cidr` read as text, Django's range dumper, the time zone loader above. They
  are registered on the cursor, never on the connection, whose own adapters stay
  the harness's.

Django loads this module when `DATABASES[...]["ENGINE"]` is `leasecheck.adapters.django`.
"""

from __future__ import annotations

import datetime
from typing import Any

import psycopg
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS
from django.db.backends.postgresql import base as postgresql
from django.db.backends.postgresql.psycopg_any import DjangoRangeDumper, get_adapters_template
from django.db.backends.utils import debug_transaction
from django.db.transaction import TransactionManagementError
from psycopg import Connection, IsolationLevel, Transaction
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.range import Range
from psycopg.types.string import TextLoader

TEXT_LOADED = ("jsonb", "inet", "cidr")
"""Types Django's adapters template reads as text rather than psycopg's Python types."""


class DatabaseWrapper(postgresql.DatabaseWrapper):  # type: ignore[misc]  # Django ships no types
    """Django's PostgreSQL backend on an adopted psycopg connection (see the module)."""

    display_name = "PostgreSQL (leasecheck's connection)"
    connection: Any
    """The adopted psycopg connection while Django is connected, else None (Django's)."""

    def __init__(self, settings_dict: dict[str, Any], alias: str = DEFAULT_DB_ALIAS) -> None:
        super().__init__(settings_dict, alias)
        self._adopted: Connection[Any] | None = None
        self._transaction: Transaction | None = None
        self._cursor_factory: type[psycopg.Cursor[Any]] = postgresql.Cursor
        self._timestamptz: type[TimestamptzLoader] = TimestamptzLoader

    def adopt(self, conn: Connection[Any]) -> None:
        """Use `conn` for every statement from now on (the next connect picks it up)."""
        if self.connection is not None and self.connection is not conn:
            raise TransactionManagementError(
                f"database {self.alias!r} already runs on another connection: "
                "let go of it first (use_connection does)"
            )
        self._adopted = conn

    def release(self) -> None:
        """Let go of the adopted connection, rolling back a transaction Django left open."""
        self._rollback()
        self.connection = None
        self._adopted = None

    @property
    def pool(self) -> None:
        """Never a pool: the connection is adopted, not opened."""
        return None

    def get_connection_params(self) -> dict[str, Any]:
        options = self.settings_dict["OPTIONS"]
        binding = options.get("server_side_binding") is True
        return {
            "cursor_factory": postgresql.ServerBindingCursor if binding else postgresql.Cursor,
            "context": get_adapters_template(settings.USE_TZ, self.timezone),
        }

    def get_new_connection(self, conn_params: dict[str, Any]) -> Connection[Any]:
        conn = self._adopted
        if conn is None:
            raise ImproperlyConfigured(
                f"database {self.alias!r} runs on leasecheck's connection "
                "(ENGINE leasecheck.adapters.django) and none was handed over: run Django's "
                "database code inside leasecheck.adapters.django.use_connection(conn)"
            )
        self._cursor_factory = conn_params["cursor_factory"]
        self._timestamptz = _zone_loader(self.timezone)
        self.isolation_level = IsolationLevel(conn.isolation_level or IsolationLevel.READ_COMMITTED)
        return conn

    def _configure_connection(self, connection: Connection[Any]) -> bool:
        """Change no session setting; check that naive datetimes mean the same zone."""
        if not settings.USE_TZ:
            session = connection.info.parameter_status("TimeZone")
            if session is not None and session != self.timezone_name:
                raise ImproperlyConfigured(
                    f"USE_TZ = False writes naive datetimes in TIME_ZONE "
                    f"({self.timezone_name}), but the session's time zone is "
                    f"{session} and leasecheck does not change it: set USE_TZ = True, "
                    "or the server's timezone to TIME_ZONE"
                )
        return False

    def create_cursor(self, name: str | None = None) -> Any:
        cursor = super().create_cursor(name) if name else self._cursor_factory(self.connection)
        adapters = cursor.adapters
        for type_name in TEXT_LOADED:
            adapters.register_loader(type_name, TextLoader)
        adapters.register_dumper(Range, DjangoRangeDumper)
        adapters.register_loader("timestamptz", self._timestamptz)
        return cursor

    def _set_autocommit(self, autocommit: bool) -> None:
        if autocommit:
            if self._transaction is not None:
                raise TransactionManagementError(
                    "autocommit turned back on inside a transaction: commit or roll back first"
                )
            return
        with self.wrap_database_errors:
            transaction = self.connection.transaction()
            transaction.__enter__()
        self._transaction = transaction

    def _commit(self) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is None:
            return
        with debug_transaction(self, "COMMIT"), self.wrap_database_errors:
            transaction.__exit__(None, None, None)

    def _rollback(self) -> None:
        transaction, self._transaction = self._transaction, None
        if transaction is None:
            return
        with debug_transaction(self, "ROLLBACK"), self.wrap_database_errors:
            rollback = psycopg.Rollback(transaction)
            transaction.__exit__(type(rollback), rollback, None)

    def _close(self) -> None:
        """Roll back what Django left open, and let go; the harness closes its connection."""
        self._rollback()


def _zone_loader(zone: datetime.tzinfo | None) -> type[TimestamptzLoader]:
    """Return a `timestamptz` loader that gives Django's zone without changing the session's.

    Django's own loader replaces the zone of what psycopg read in the session's zone,
    which is right only when the two are one. This one converts: the same instant,
    in Django's zone (or, with `USE_TZ = False`, naive, in the session's zone).
    """

    class ZoneLoader(TimestamptzLoader):
        def load(self, data: Any) -> datetime.datetime:
            loaded = super().load(data)
            if zone is None:
                return loaded.replace(tzinfo=None)
            return loaded.astimezone(zone)

    return ZoneLoader
