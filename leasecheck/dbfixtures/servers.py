"""Find the PostgreSQL server the suite runs against: a DSN, Docker, or embedded.

Each way returns a `Server` with a DSN and a `stop()`; every failure is a
`ServerUnavailable` whose one-line message says how to fix it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from leasecheck.dbfixtures import debian, embedded, janitor
from leasecheck.dbfixtures.redact import Dsn, without_password

SOURCES = ("embedded", "docker", "dsn")
_MAJOR = re.compile(r"^embedded-(\d+)$")
"""`embedded-15`: the embedded way with another major's binaries (`debian`)."""
_USERINFO = re.compile(r"//[^/@\s]*@")
_AFTER = re.compile(r'after "([^"]*)"')


class ServerUnavailable(RuntimeError):
    """No usable server; the message is one line that says how to fix it."""


@dataclass
class Server:
    """A server the suite may create databases on (its repr hides the DSN's password)."""

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
        # libpq quotes the DSN back: hide the user:password part of a URI, and the word a
        # missing "=" follows unless it is a keyword (`passwordhunter2`; a password's tail
        # after a space). An invalid option's quoted name is a key, never a value.
        reason = _USERINFO.sub("//***@", " ".join(str(exc).split()))
        reason = _AFTER.sub(lambda m: m[0] if m[1] in _keywords() else 'after "***"', reason)
        raise ServerUnavailable(
            f"malformed DSN in --leasecheck-pg-dsn / LEASECHECK_DSN ({reason}); write it as "
            "'postgresql://user:password@host:5432/dbname' or 'host=... user=... dbname=...'"
        ) from None


def _keywords() -> set[str]:
    """Return the words libpq may quote back with no secret in them: its keywords."""
    return {d.keyword.decode() for d in psycopg.pq.Conninfo.get_defaults()}


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
    return probe(Server(dsn=Dsn(dsn), source="dsn"))


def cache_dir() -> Path:
    """Return where another major's unpacked package is kept: $XDG_CACHE_HOME/leasecheck."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "leasecheck"


def from_embedded(major: int | None = None) -> Server:
    """Start the embedded server (of `major`, if another than the wheel's) and return it."""
    try:
        bin_dir = None
        if major is not None and major != embedded.major(embedded.version()):
            bin_dir = debian.binaries(major, cache_dir()).bin_dir
        emb = embedded.start(bin_dir=bin_dir)
    except (embedded.EmbeddedServerError, debian.PackageUnavailable, OSError) as exc:
        reason = " ".join(str(exc).split())
        raise ServerUnavailable(
            f"the embedded PostgreSQL did not start: {reason}; "
            "or pass --leasecheck-pg-dsn for a server you run"
        ) from None
    return probe(
        Server(dsn=Dsn(emb.dsn), source=f"embedded at {emb.root}", stop=emb.stop, embedded=emb)
    )


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
        # Trust, so that the DSN the run hands its workers needs no password (a throwaway
        # server on a port of this machine; leasecheck writes no password down).
        container.with_env("POSTGRES_HOST_AUTH_METHOD", "trust")
        container.start()
    except Exception as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ServerUnavailable(
            f"--leasecheck-pg=docker could not start {image} ({reason}): no Docker engine is "
            "reachable; start Docker, or drop --leasecheck-pg=docker to use the embedded server"
        ) from None
    dsn = Dsn(without_password(str(container.get_connection_url())))
    return probe(Server(dsn=dsn, source=f"docker {image}", stop=container.stop))


def resolve(source: str, dsn: str | None, image: str) -> Server:
    """Return the server the options ask for."""
    major = _MAJOR.match(source)
    if source not in SOURCES and major is None:
        raise ServerUnavailable(
            f"unknown --leasecheck-pg value {source!r}: use one of {', '.join(SOURCES)} "
            "(or embedded-N for PostgreSQL N, e.g. embedded-15)"
        )
    if dsn or source == "dsn":
        if not dsn:
            raise ServerUnavailable(
                "--leasecheck-pg=dsn needs --leasecheck-pg-dsn or LEASECHECK_DSN"
            )
        return from_dsn(dsn)
    if source == "docker":
        return from_docker(image)
    return from_embedded(int(major.group(1)) if major else None)
