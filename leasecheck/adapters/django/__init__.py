"""Django's ORM on the harness's connection, for adapters of Django-based queues.

A queue built on Django (django-tasks-db, django-q2, ...) runs its SQL through
Django's ORM, which opens and manages connections of its own; the contract wants
every statement on the psycopg connection the harness hands each call, with
transactions changed only through `conn.transaction()`. Two pieces make Django do
that, and nothing more:

- `ENGINE` (`leasecheck.adapters.django`), a database backend: Django's PostgreSQL
  backend that adopts a connection instead of opening one, never commits or closes
  it behind the harness's back, and leaves its session settings alone (`base.py`
  says exactly what it changes).
- `use_connection(conn)`, a context manager: for the calls inside it, on this
  thread, `django.db.connections["default"]` (or `alias`) is such a backend on
  `conn`; afterwards the alias is what it was before.
- `django_clock(conn)`, a context manager: Django's clock (`django.utils.timezone.now`,
  which `auto_now`, `auto_now_add` and libraries call) answers `conn`'s `now()`, read
  once, as `leasecheck.adapters.client_clock` does for `time.time()`; outside a block
  it answers the real clock.

In an adapter (the recipe in docs/adapters.md):

    settings.configure(
        DATABASES={"default": {"ENGINE": ENGINE, "NAME": "leasecheck"}},
        INSTALLED_APPS=[...],
    )
    django.setup()

    def claim(self, conn, worker, lease):
        with psycopg_errors(), use_connection(conn), django_clock(conn):
            ...  # the library's own code, its ORM queries and atomic blocks

With `ENGINE` in `DATABASES`, Django code that runs outside `use_connection` raises
instead of opening a connection of its own; `use_connection` also works on an alias
with another engine (a project's own settings), taking that alias's `OPTIONS`.
Django's errors are Django's (`django.db.OperationalError`, ...): the psycopg error
the harness reads (a cut connection, its cancel) is their `__cause__`, and
`psycopg_errors()` re-raises it.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db import Error as DjangoError
from django.utils import timezone
from psycopg import Connection

from leasecheck.adapters import client_clock
from leasecheck.adapters.django.base import DatabaseWrapper

ENGINE = __name__
"""`DATABASES[...]["ENGINE"]` for Django code that must run on the harness's connection."""

__all__ = [
    "ENGINE",
    "DatabaseWrapper",
    "django_clock",
    "psycopg_errors",
    "uninstall_clock",
    "use_connection",
]

_GUARD = threading.Lock()
_REAL_NOW: list[Callable[[], datetime.datetime]] = []
"""Django's own `timezone.now`, while `django_clock` has replaced it."""


@contextmanager
def use_connection(
    conn: Connection[Any], alias: str = DEFAULT_DB_ALIAS
) -> Iterator[DatabaseWrapper]:
    """Run Django's database alias `alias` on `conn` for the duration of the block.

    The backend is a fresh `DatabaseWrapper` on this thread (Django keeps one per
    thread); on the way out a transaction Django left open is rolled back, the
    connection is let go (never closed) and the alias's previous backend is back.
    """
    previous = connections[alias]
    wrapper = DatabaseWrapper(connections.settings[alias], alias)
    wrapper.adopt(conn)
    connections[alias] = wrapper
    try:
        yield wrapper
    finally:
        try:
            wrapper.release()
        finally:
            connections[alias] = previous


@contextmanager
def psycopg_errors() -> Iterator[None]:
    """Re-raise a Django database error as the psycopg error under it.

    Django wraps every driver error in its own class (`django.db.utils`); the
    harness tells a lost connection (`psycopg.OperationalError`) and its own cancel
    (`QueryCanceled`) from a queue's answer by psycopg's classes.
    """
    try:
        yield
    except DjangoError as exc:
        if isinstance(exc.__cause__, psycopg.Error):
            raise exc.__cause__ from None
        raise


def _simulated_now() -> datetime.datetime:
    """`timezone.now()` as Django answers it, at the `client_clock` block's instant."""
    at = client_clock.current()
    if at is None:
        return _REAL_NOW[0]()
    if settings.USE_TZ:
        return at.astimezone(datetime.UTC)
    return at.astimezone(timezone.get_default_timezone()).replace(tzinfo=None)


def _install_clock() -> None:
    """Replace `django.utils.timezone.now` for good (idempotent); outside a block it is real."""
    with _GUARD:
        if not _REAL_NOW:
            _REAL_NOW.append(timezone.now)
            timezone.now = _simulated_now


def uninstall_clock() -> None:
    """Put Django's own `timezone.now` back (nothing happens if `django_clock` never ran)."""
    with _GUARD:
        if _REAL_NOW:
            timezone.now = _REAL_NOW.pop()


@contextmanager
def django_clock(conn: Connection[Any]) -> Iterator[datetime.datetime]:
    """Within the block, Django's `timezone.now()` answers `conn`'s `now()`, read once.

    Django code reads its clock as `timezone.now()` (`auto_now`, `auto_now_add`,
    django-tasks-db's `started_at` and `ready()`), so replacing that attribute reaches
    it; a module that did `from django.utils.timezone import now` keeps the real one
    (Django's migration recorder and file storage do). The instant is
    `leasecheck.adapters.client_clock`'s: it holds on this thread and nowhere else, and
    a `client_clock` block of the same call sees the same one. Yield the instant.
    """
    _install_clock()
    with client_clock.client_clock(conn) as at:
        yield at
