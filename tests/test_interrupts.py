"""Stopping `leasecheck check`: SIGINT or SIGTERM ends its run within seconds, with one
line and no traceback, and leaves no server, process or file behind; the run also
reports its progress while it lasts.

Each test runs the real command on the reference queue with the `deep` profile (far
more than a test waits for) under xdist, in a TMPDIR of its own where the run's
embedded server lives, waits (with a deadline) until the run is under way (its
first progress line, or xdist handing out the shards), then stops it. Nothing sleeps
in the machine; the tests poll with deadlines.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasecheck.dbfixtures import plugin as dbplugin
from tests import child

pytestmark = pytest.mark.slow

REFERENCE = "leasecheck.reference.queue:ReferenceQueue"
PROGRESS = "leasecheck: 10 s: "
STOPS_WITHIN = 30.0
"""Seconds a stopped run may take: its workers end their examples and drop their
databases (or have their sessions ended after a grace period), the server stops."""


class Run:
    """A running `leasecheck check`, its output read as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, fragment: str, within: float) -> None:
        deadline = time.monotonic() + within
        while not any(fragment in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {fragment!r} within {within} s:\n" + self.output)
            time.sleep(0.1)

    def finish(self, within: float) -> int:
        code = self.proc.wait(timeout=within)
        self.reader.join(timeout=10)
        return code

    def close(self) -> None:
        """End the command's process group if it still runs, and close the pipe."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.reader.join(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def scratch() -> Iterator[Path]:
    """Return an empty TMPDIR for the run (its server, xdist's run directory)."""
    with child.scratch() as path:
        yield path


def _start(tmp: Path, cwd: Path) -> Run:
    command = [
        str(Path(sys.executable).with_name("leasecheck")),
        "check", REFERENCE, "-n", "2", "--leasecheck-profile", "deep",
    ]  # fmt: skip
    return Run(child.start(command, tmp, cwd=cwd, group=True))


def _left(tmp: Path) -> list[str]:
    return [p.name for p in tmp.iterdir() if not p.name.startswith("pytest-of-")]


@pytest.mark.parametrize(
    ("signum", "code", "when"),
    [
        (signal.SIGINT, 130, PROGRESS),  # the first progress line, 10 s into the run
        (signal.SIGTERM, 143, " workers ["),  # xdist has handed out the shards
    ],
)
def test_a_stopped_check_ends_cleanly_within_seconds(
    signum: signal.Signals, code: int, when: str, scratch: Path, tmp_path: Path
) -> None:
    run = _start(scratch, tmp_path)
    try:
        run.wait_for(when, within=180)
        assert [p for p in _left(scratch) if p.startswith("leasecheck-pg-")], "no server ran"
        before = len(run.lines)
        stopped = time.monotonic()
        run.proc.send_signal(signum)
        assert run.finish(within=STOPS_WITHIN + 30) == code, run.output
        took = time.monotonic() - stopped
    finally:
        run.close()
    after = run.lines[before:]
    said = [line for line in after if f"stopped by {signum.name}" in line]
    assert len(said) == 1, run.output
    assert "Traceback" not in run.output, run.output
    assert took < STOPS_WITHIN, f"took {took:.1f} s to stop:\n{run.output}"
    assert child.processes_under(scratch) == []
    assert _left(scratch) == [], "the run left its server or files behind"
    if when == PROGRESS:
        (line,) = [line for line in run.lines if line.startswith(PROGRESS)]
        assert "examples generated, 0/8 shards done, no violation so far" in line, line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_check_takes_its_run_with_it(scratch: Path, tmp_path: Path) -> None:
    """SIGKILL on the command: its run hears of it (SIGTERM) and cleans up after itself."""
    run = _start(scratch, tmp_path)
    try:
        run.wait_for("leasecheck: PostgreSQL", within=180)
        run.proc.kill()
        run.finish(within=30)
        deadline = time.monotonic() + STOPS_WITHIN
        while (_left(scratch) or child.processes_under(scratch)) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        run.close()
    assert child.processes_under(scratch) == []
    assert _left(scratch) == [], "the orphaned run left its server or files behind"


def test_an_interrupt_is_never_raised_where_python_would_drop_it() -> None:
    """Inside a garbage collector's callback or a `__del__`, a raised interrupt is printed
    and dropped; the handler asks again instead (seen once: a SIGINT that landed in
    Hypothesis's gc callback printed a traceback and a second "stopped by" line)."""
    seen: dict[str, bool] = {}

    def callback(phase: str, info: dict[str, int]) -> None:
        seen.setdefault("gc callback", dbplugin.swallowed(sys._getframe()))

    class Dying:
        def __del__(self) -> None:
            seen["__del__"] = dbplugin.swallowed(sys._getframe())

    class Hashed:  # a WeakSet hashes its members from its own code (its callbacks' home)
        def __hash__(self) -> int:
            seen.setdefault("weakref module", dbplugin.swallowed(sys._getframe()))
            return 0

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    Dying()
    member = Hashed()
    assert member in weakref.WeakSet([member])
    assert seen == {"gc callback": True, "__del__": True, "weakref module": True}
    assert not dbplugin.swallowed(sys._getframe())
