"""Run a pytest session of the suite in a child process, and find what it left behind.

The reliability tests (leaks, database safety, bad input) judge whole sessions: the
exit code, the lines a person sees, and the servers and databases that outlive the
child. The child gets its own temporary directory, so the embedded server it starts
(and every process of that server, whose working directory is its data directory)
can be told apart from the server the calling session uses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 120.0
"""Seconds `run` gives a child session to end."""


@dataclass(frozen=True)
class Finished:
    """A child session that has ended."""

    returncode: int
    output: str

    @property
    def lines(self) -> list[str]:
        """Return the non-blank lines of stdout and stderr together."""
        return [line for line in self.output.splitlines() if line.strip()]


@contextmanager
def scratch() -> Iterator[Path]:
    """Yield a fresh directory for a child's TMPDIR, where an embedded server can run; remove it.

    It sits in the system temporary directory, not under pytest's `tmp_path`: as root
    the server runs as `nobody`, who cannot enter pytest's private directories.
    """
    path = Path(tempfile.mkdtemp(prefix="leasecheck-child-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        # A test that found a leak must not leave it running: end what lives here.
        for pid in processes_under(path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


def environment(tmp: Path, **extra: str) -> dict[str, str]:
    """Return the environment for a child: no inherited pytest, xdist or leasecheck settings."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "LEASECHECK_", "HYPOTHESIS_")) and k != "CI"
    }
    path = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(TMPDIR=str(tmp), PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def command(*args: str, rootdir: Path | None = None) -> list[str]:
    """Return the argv of a child pytest; with `rootdir`, it loads the suite's plugins itself."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    if rootdir is not None:
        ini = rootdir / "pytest.ini"
        if not ini.exists():
            ini.write_text("[pytest]\n")
        argv += ["-c", str(ini), "--rootdir", str(rootdir)]
    return [*argv, *args]


def run(
    argv: list[str], tmp: Path, cwd: Path = REPO, timeout: float = TIMEOUT, **env: str
) -> Finished:
    """Run a child session to its end and return its exit code and output."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=environment(tmp, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Finished(done.returncode, done.stdout)


def _interruptible() -> None:
    """Give the child the default SIGINT: a shell's background job (as CI may run the
    suite) starts with SIGINT ignored, which the child would inherit across exec, and
    Python would then never raise KeyboardInterrupt for the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(
    argv: list[str], tmp: Path, cwd: Path = REPO, group: bool = False, **env: str
) -> subprocess.Popen[str]:
    """Start a child session and return it still running (its output is piped).

    With `group`, in a process group of its own, so that a test can end every process
    of it at once (`os.killpg(child.pid, ...)`), xdist's workers included.
    """
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=environment(tmp, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_interruptible,
        process_group=0 if group else None,
    )


def processes_under(directory: Path) -> list[int]:
    """Return the pids of live processes whose working directory or program is in `directory`.

    Every process of an embedded server (the postmaster and each backend) runs in
    its data directory, so this finds a server by where it lives, also after its
    directory was deleted.
    """
    prefix = str(directory.resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        for link in ("cwd", "exe"):
            try:
                target = os.readlink(entry / link)
            except OSError:
                continue
            if target == prefix or target.startswith(prefix + os.sep):
                found.append(int(entry.name))
                break
    return sorted(found)
