"""A session leaves no server and no database behind: passing, failing, interrupted or killed.

SIGTERM (a cancelled CI job) counts as an interruption, as SIGINT does. A session
killed outright (SIGKILL) cannot clean up: what it left (its embedded server, the
xdist run directory) is reaped by the next session that starts a server.

Each test runs a tiny throwaway test file in a child pytest with the suite's
plugins, then looks for what outlived it: processes of the embedded server the
child started (found by its temporary directory, never confused with the server
this session uses) and databases carrying the child's own label.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasecheck.dbfixtures import janitor
from tests import child

_THROWAWAY = """
import json, os, time
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def leasecheck_worker_label() -> str:
    return os.environ["LEAK_LABEL"]


def test_holds_a_database(leasecheck_database, leasecheck_server):
    emb = leasecheck_server.embedded
    # Written aside, then renamed: the parent signals as soon as the marker exists.
    marker = Path(os.environ["LEAK_MARKER"])
    draft = marker.with_suffix(".draft")
    draft.write_text(json.dumps({
        "database": leasecheck_database,
        "root": str(emb.root) if emb else None,
        "pid": emb.pid if emb else None,
    }))
    draft.replace(marker)
    if os.environ["LEAK_MODE"] == "fail":
        raise AssertionError("this failure is on purpose")
    if os.environ["LEAK_MODE"].startswith("sig"):
        time.sleep(300)
"""


@pytest.fixture
def child_tmp() -> Iterator[Path]:
    """Return an empty TMPDIR for the child, where its embedded server (if any) will live."""
    with child.scratch() as path:
        yield path


_EXIT = {"pass": 0, "fail": 1, "sigint": 2, "sigterm": 2}
_SIGNAL = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}


def _wait_for(marker: Path, proc: subprocess.Popen[str]) -> None:
    """Wait until the child's test is running (it wrote the marker), or the child ended."""
    while not marker.exists() and proc.poll() is None:
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


@pytest.mark.parametrize(
    ("mode", "server"),
    [
        ("pass", "embedded"),
        ("fail", "embedded"),
        ("sigint", "embedded"),
        ("sigint", "dsn"),
        ("sigterm", "embedded"),
    ],
)
def test_a_session_leaves_no_server_and_no_database(
    mode: str, server: str, tmp_path: Path, child_tmp: Path, leasecheck_server_dsn: str
) -> None:
    """Whether its test passes, fails or is interrupted, the child cleans up after itself."""
    (tmp_path / "test_throwaway.py").write_text(_THROWAWAY)
    marker, tmp = tmp_path / "marker.json", child_tmp
    label = f"leak{secrets.token_hex(3)}"
    args = ["test_throwaway.py"] + (
        ["--leasecheck-pg-dsn", leasecheck_server_dsn] if server == "dsn" else []
    )
    proc = child.start(
        child.command(*args, rootdir=tmp_path),
        tmp,
        cwd=tmp_path,
        LEAK_MARKER=str(marker),
        LEAK_MODE=mode,
        LEAK_LABEL=label,
    )
    try:
        if mode in _SIGNAL:
            _wait_for(marker, proc)
            proc.send_signal(_SIGNAL[mode])
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert marker.exists(), f"the child's test never ran:\n{output}"
    seen = json.loads(marker.read_text())
    assert proc.returncode == _EXIT[mode], output
    assert f"leasecheck_{label}_" in seen["database"]
    if server == "embedded":
        assert Path(seen["root"]).parent == tmp, "the child's server is not in its own tmpdir"
        assert not _alive(seen["pid"]), f"postmaster {seen['pid']} outlived the session"
        assert child.processes_under(tmp) == []
        assert list(tmp.iterdir()) == [], "the server's directory was not removed"
    else:
        left = [
            d
            for d in janitor.leftovers(leasecheck_server_dsn)
            if d.startswith(f"leasecheck_{label}")
        ]
        assert left == []


@pytest.mark.parametrize("workers", ["0", "2"])
def test_what_a_killed_session_left_is_reaped_by_the_next(
    workers: str, tmp_path: Path, child_tmp: Path
) -> None:
    """SIGKILL leaves the server running and its directory in place; the next session
    that starts a server kills it and deletes what it wrote, and leaves nothing itself."""
    (tmp_path / "test_throwaway.py").write_text(_THROWAWAY)
    marker, tmp = tmp_path / "marker.json", child_tmp
    argv = child.command("test_throwaway.py", "-n", workers, rootdir=tmp_path)
    env = {"LEAK_MARKER": str(marker), "LEAK_LABEL": f"leak{secrets.token_hex(3)}"}
    killed = child.start(argv, tmp, cwd=tmp_path, group=True, LEAK_MODE="sigkill", **env)
    try:
        _wait_for(marker, killed)
        killed.kill()  # the controller only: xdist's workers, if any, go on alone
        killed.communicate(timeout=60)
        (root,) = tmp.glob("leasecheck-pg-*")  # under xdist only the controller knew it
        pid = int((root / "data" / "postmaster.pid").read_text().split()[0])
        assert _alive(pid), "nothing was left to reap"
        if workers == "2":
            assert list(tmp.glob("leasecheck-run-*")), "xdist's run directory was not left"
        marker.unlink()
        done = child.run(argv, tmp, cwd=tmp_path, LEAK_MODE="pass", **env)
        assert done.returncode == 0, done.output
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(killed.pid, signal.SIGKILL)
    assert not _alive(pid), f"the killed session's postmaster {pid} still runs"
    assert not root.exists()
    assert child.processes_under(tmp) == []
    assert [p.name for p in tmp.iterdir() if not p.name.startswith("pytest-of-")] == []
