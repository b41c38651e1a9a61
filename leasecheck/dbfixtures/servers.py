"""Find the PostgreSQL server the suite runs against: a DSN, Docker, or embedded.

Each way returns a `Server` with a DSN and a `stop()`; every failure is a
`ServerUnavailable` whose one-line message says how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from psycopg.conninfo import conninfo_to_dict

from leasecheck.dbfixtures import embedded, janitor

SOURCES = ("embedded", "docker", "dsn")
_USERINFO = re.compile(r"//[^/@\s]*@")


class ServerUnavailable(RuntimeError):
    """No usable server; the message is one line that says how to fix it."""


@dataclass
class Server:
    """A server the suite may create databases on."""

    dsn: str
    source: str
    version: str = ""
    stop: Callable[[], None] = field(default=lambda: None)
    embedded: embedded.EmbeddedServer | None = None


def check_dsn(dsn: str) -> None:
    """Raise ServerUnavailable when `dsn` cannot even be parsed."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        # libpq quotes the DSN back: hide the user:password part of a URI.
        reason = _USERINFO.sub("//***@", " ".join(str(exc).split()))
        raise ServerUnavailable(
            f"malformed DSN in --leasecheck-pg-dsn / LEASECHECK_DSN ({reason}); write it as "
            "'postgresql://user:password@host:5432/dbname' or 'host=... user=... dbname=...'"
        ) from None


def probe(server: Server) -> Server:
    """Connect once, fill in the version and check the role may create databases.

    Raise ServerUnavailable if either fails, so that a run under `-n auto` stops once,
    in the controller, before any worker starts.
    """
    try:
        with psycopg.connect(server.dsn, connect_timeout=10, autocommit=True) as conn:
            server.version = str(conn.execute("show server_version").fetchone()[0])  # type: ignore[index]
            janitor.check_may_create(conn)
    except psycopg.OperationalError as exc:
        server.stop()
        reason = _reason(exc)
        raise ServerUnavailable(
            f"cannot connect to PostgreSQL ({server.source}): {reason}; check the server is up "
            "and the DSN (--leasecheck-pg-dsn / LEASECHECK_DSN) is right, or omit it for the "
            "embedded server"
        ) from None
    except janitor.DatabaseRefused as exc:
        server.stop()
        raise ServerUnavailable(str(exc)) from None
    return server


def _reason(exc: psycopg.OperationalError) -> str:
    """Return libpq's reason on one line, without its indented hints (ours follows)."""
    lines = [" ".join(line.split()) for line in str(exc).splitlines() if line[:1].strip()]
    return "; ".join(lines).rstrip(".")


def from_dsn(dsn: str) -> Server:
    """Return the user's own server."""
    check_dsn(dsn)
    return probe(Server(dsn=dsn, source="dsn"))


def from_embedded() -> Server:
    """Start the embedded server and return it."""
    try:
        emb = embedded.start()
    except (embedded.EmbeddedServerError, OSError) as exc:
        reason = " ".join(str(exc).split())
        raise ServerUnavailable(
            f"the embedded PostgreSQL did not start: {reason}; "
            "or pass --leasecheck-pg-dsn for a server you run"
        ) from None
    return probe(Server(dsn=emb.dsn, source=f"embedded at {emb.root}", stop=emb.stop, embedded=emb))


def from_docker(image: str) -> Server:
    """Start a testcontainers PostgreSQL and return it."""
    try:
        from testcontainers.postgres import PostgresContainer
    except ImportError:
        raise ServerUnavailable(
            "--leasecheck-pg=docker needs testcontainers: pip install 'leasecheck[docker]'"
        ) from None
    try:
        container = PostgresContainer(image, driver=None)
        container.start()
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ServerUnavailable(
            f"--leasecheck-pg=docker could not start {image} ({reason}): no Docker engine is "
            "reachable; start Docker, or drop --leasecheck-pg=docker to use the embedded server"
        ) from None
    url = str(container.get_connection_url())
    return probe(Server(dsn=url, source=f"docker {image}", stop=container.stop))


def resolve(source: str, dsn: str | None, image: str) -> Server:
    """Return the server the options ask for."""
    if source not in SOURCES:
        raise ServerUnavailable(
            f"unknown --leasecheck-pg value {source!r}: use one of {', '.join(SOURCES)}"
        )
    if dsn or source == "dsn":
        if not dsn:
            raise ServerUnavailable(
                "--leasecheck-pg=dsn needs --leasecheck-pg-dsn or LEASECHECK_DSN"
            )
        return from_dsn(dsn)
    if source == "docker":
        return from_docker(image)
    return from_embedded()
