"""Keep a DSN's password out of every output, repr and file.

A DSN travels far: into fixtures (whose values pytest prints beside a failing
test), dataclasses (`Server`, the harness's pool, whose reprs show their fields),
and the file an xdist controller leaves for its workers. `Dsn` is a `str` that
connects as the DSN it holds but whose repr hides the password, and
`without_password` is what may be written down or shown.
"""

from __future__ import annotations

import re

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

HIDDEN = "***"
_USERINFO = re.compile(r"(//[^/:@\s]*):[^/@\s]*@")
_KEYWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _params(dsn: str) -> dict[str, str] | None:
    try:
        return {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    except psycopg.ProgrammingError:
        return None


def password(dsn: str) -> str | None:
    """Return the password `dsn` holds, or None."""
    params = _params(dsn)
    return None if params is None else params.get("password")


def without_password(dsn: str) -> str:
    """Return `dsn` with its password left out (libpq then asks $PGPASSWORD or ~/.pgpass)."""
    params = _params(dsn)
    if params is None:
        return hide(dsn)
    params.pop("password", None)
    return make_conninfo("", **params)


def with_password(dsn: str, secret: str | None) -> Dsn:
    """Return `dsn` with `secret` as its password (as it was, when `secret` is None)."""
    return Dsn(dsn if secret is None else make_conninfo(dsn, password=secret))


def hide(text: str) -> str:
    """Return `text` with every password written in DSN form (either form) masked."""
    text = _USERINFO.sub(rf"\1:{HIDDEN}@", text)
    return _KEYWORD.sub(rf"\g<1>{HIDDEN}", text)


def shown(dsn: str) -> str:
    """Return `dsn` as it may be printed: its password masked."""
    params = _params(dsn)
    if params is None:
        return hide(dsn)
    if "password" in params:
        params["password"] = HIDDEN
    return make_conninfo("", **params)


class Dsn(str):
    """A DSN that connects as itself and shows itself without its password."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(shown(self))
