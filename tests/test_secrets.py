"""A DSN's password never leaks: not in output, tracebacks, reprs or files.

Runs go to an embedded server of this module's own that checks passwords over TCP
(`embedded.start(password=...)`), so the password is really needed and really
given. Each run's output, and every file under its project and its TMPDIR (read
while it runs, too: xdist's hand-off directory lives only as long as the run), are
searched for the password.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasecheck.dbfixtures import embedded, janitor, servers
from leasecheck.dbfixtures.redact import Dsn, hide, password, shown, without_password
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock
from leasecheck.stateful.engine import actors
from leasecheck.wing import plugin
from tests import child

PASSWORD = f"pw-{secrets.token_hex(12)}"
NAIVE = "mutants.naive:Naive"
COUNTEREXAMPLE = Path(__file__).with_name("data") / "naive-single-completion.json"


@pytest.fixture(scope="module")
def password_server() -> Iterator[embedded.EmbeddedServer]:
    """Return a server that asks TCP connections for PASSWORD; stop it after."""
    server = embedded.start("leasecheck-pw-", password=PASSWORD)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def dsn(password_server: embedded.EmbeddedServer) -> str:
    return password_server.tcp_dsn("postgres", PASSWORD)


class Watch:
    """Read every file under some directories, over and over, until stopped."""

    def __init__(self, *roots: Path) -> None:
        self.roots = roots
        self.seen: dict[Path, bytes] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.stop.is_set():
            self.look()
            time.sleep(0.05)

    def look(self) -> None:
        for root in self.roots:
            for path in root.rglob("*"):
                try:
                    if path.is_file() and not path.is_symlink() and path.stat().st_size < 10**7:
                        self.seen[path] = path.read_bytes()
                except OSError:
                    continue

    def holding(self, secret: str) -> list[Path]:
        self.stop.set()
        self.thread.join(timeout=10)
        self.look()
        return sorted(p for p, data in self.seen.items() if secret.encode() in data)


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "tests" / "leasecheck").mkdir(parents=True)
    shutil.copy(COUNTEREXAMPLE, project / "tests" / "leasecheck")
    (project / "pytest.ini").write_text(
        f"[pytest]\nleasecheck_queue = {NAIVE}\nleasecheck_regressions = tests/leasecheck\n"
    )
    return project


def _leasecheck() -> str:
    return str(Path(sys.executable).with_name("leasecheck"))


@pytest.mark.slow
def test_a_failing_check_shows_and_writes_no_password(
    tmp_path: Path, dsn: str, password_server: embedded.EmbeddedServer
) -> None:
    """Broken properties and a committed failure that breaks again, under xdist, with
    tracebacks as long as pytest makes them and every local shown."""
    project = _project(tmp_path)
    with child.scratch() as tmp:
        watch = Watch(project, tmp)
        done = child.run(
            [
                _leasecheck(), "check", "--pg-dsn", dsn, "-n", "2", "--leasecheck-shards", "2",
                "--", "--hypothesis-seed=1", "--tb=long", "-l",
            ],
            tmp,
            cwd=project,
            timeout=300,
        )  # fmt: skip
        held = watch.holding(PASSWORD)
    assert done.returncode == 1, done.output
    assert "[single-completion] job1 completed 2 times" in done.output
    assert "the committed failure tests/leasecheck/naive-single-completion.json" in done.output
    assert PASSWORD not in done.output
    assert held == []
    assert janitor.leftovers(password_server.dsn) == []


@pytest.mark.slow
def test_a_stopped_check_shows_and_leaves_no_password(
    tmp_path: Path, dsn: str, password_server: embedded.EmbeddedServer
) -> None:
    """SIGTERM while the shards run: nothing of the run is left, and nothing it wrote
    while it ran (xdist's hand-off of the server included) held the password."""
    project = _project(tmp_path)
    with child.scratch() as tmp:
        watch = Watch(project, tmp)
        command = [
            _leasecheck(), "check", "leasecheck.reference.queue:ReferenceQueue",
            "--pg-dsn", dsn, "-n", "2", "--profile", "deep",
        ]  # fmt: skip
        proc = child.start(command, tmp, cwd=project)
        try:
            deadline = time.monotonic() + 120
            while not list(tmp.glob("leasecheck-run-*/server.json")):
                assert proc.poll() is None and time.monotonic() < deadline, "no run started"
                time.sleep(0.05)
            time.sleep(1)  # let the workers read it and start their shards
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        held = watch.holding(PASSWORD)
        shared = [p for p in watch.seen if p.name == "server.json"]
    assert proc.returncode == 143, output
    assert shared, "the watch never saw xdist's hand-off"
    assert PASSWORD not in output
    assert held == []
    assert janitor.leftovers(password_server.dsn) == []


def test_a_failing_test_shows_its_dsn_fixtures_without_the_password(
    tmp_path: Path, dsn: str
) -> None:
    """pytest shows a failing test's fixture values (and, with -l, every local)."""
    (tmp_path / "test_shown.py").write_text(
        "def test_shown(leasecheck_server_dsn, leasecheck_database, leasecheck_server):\n"
        "    dsn = leasecheck_database\n"
        "    assert dsn == 'something else'\n"
    )
    with child.scratch() as tmp:
        done = child.run(
            child.command(
                "test_shown.py", f"--leasecheck-pg-dsn={dsn}", "-n", "2", "-l", "--tb=long",
                rootdir=tmp_path,
            ),
            tmp,
            cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 1, done.output
    assert "password=***" in done.output
    assert PASSWORD not in done.output


def test_reprs_and_messages_hide_the_password(dsn: str) -> None:
    """Everything that carries a DSN shows it masked and still connects with it."""
    held = Dsn(dsn)
    assert PASSWORD in str(held) and PASSWORD not in repr(held)
    assert PASSWORD not in shown(held) and "password=***" in shown(held)
    assert password(held) == PASSWORD and password(without_password(held)) is None
    server = servers.from_dsn(dsn)
    assert PASSWORD not in repr(server)
    with janitor.temporary(server.dsn, "secret") as database:
        assert PASSWORD not in repr(database)
        clock.prepare(database, ReferenceQueue())
        pool = actors.Pool(database)
        try:
            assert PASSWORD not in repr(pool)
            harness = plugin._Harness(queue=ReferenceQueue(), pool=pool, spec="x:Y")
            assert repr(harness) == "Harness(queue='reference', spec='x:Y')"
        finally:
            pool.close()


@pytest.mark.parametrize(
    "text",
    ["postgresql://me:{}@db:5432/x", "host=db password={} user=me", "password = '{} x' user=me"],
)
def test_hide_masks_both_forms(text: str) -> None:
    assert PASSWORD not in hide(text.format(PASSWORD))
