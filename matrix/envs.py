"""One isolated venv per library version, built once and reused while its inputs stand.

A venv lives in `<cache>/envs/<target name>` and holds the project (editable) and the
target's pinned requirements, nothing else. A stamp file records a hash of what went
into it (the requirement lines, the interpreter's version and the project's
pyproject.toml); a venv whose stamp differs is rebuilt from scratch. Targets without
requirements run in the interpreter that runs the matrix. A target's npm pins (the
Node.js queues) are installed by `matrix.npm` under `<cache>/npm`, which the runs find
through `LEASECHECK_NPM_DIR`.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from matrix import npm
from matrix.targets import Target

STAMP = "leasecheck-matrix-key"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+")


class EnvError(RuntimeError):
    """A venv could not be had; the message is one line that says why."""


@dataclass(frozen=True)
class Env:
    """An interpreter to run a target with, and what is installed in it."""

    python: Path
    python_version: str
    versions: dict[str, str]
    built: bool


def find_python(minor: str) -> Path:
    """Return an interpreter of version `minor` ("3.12"); raise EnvError if none is found."""
    variable = f"LEASECHECK_PYTHON{minor.replace('.', '')}"
    candidates = [os.environ.get(variable), shutil.which(f"python{minor}")]
    candidates += sorted(
        glob.glob(os.path.expanduser(f"~/.pyenv/versions/{minor}.*/bin/python3")), reverse=True
    )
    candidates += [f"/usr/bin/python{minor}", f"/usr/local/bin/python{minor}"]
    for candidate in filter(None, candidates):
        if _version(Path(candidate), minor_only=True) == minor:
            return Path(candidate)
    raise EnvError(
        f"python{minor} not found: install it (e.g. pyenv install {minor}) "
        f"or set {variable}=/path/to/python{minor}"
    )


def _version(python: Path, *, minor_only: bool = False) -> str | None:
    """Return the interpreter's version ("3.12" or "3.12.1"), or None if it does not run."""
    parts = 2 if minor_only else 3
    code = f"import sys; print('.'.join(map(str, sys.version_info[:{parts}])))"
    try:
        done = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def ensure(target: Target, repo: Path, cache: Path) -> Env:
    """Return the interpreter for `target`, building (or reusing) its venv (and npm pins)."""
    packages = _npm(target, cache)
    if not target.requirements:
        python = Path(sys.executable)
        versions = {**packages, **_installed(python, ())}
        return Env(python, _version(python) or "?", versions, built=False)
    base = find_python(target.python) if target.python else Path(sys.executable)
    base_version = _version(base) or "?"
    lines = (f"-e {repo}", *target.requirements)
    key = hashlib.sha256(
        "\n".join((*lines, base_version, (repo / "pyproject.toml").read_text())).encode()
    ).hexdigest()
    home = cache / "envs" / target.name
    python = home / "bin" / "python"
    stamp = home / STAMP
    built = False
    if not (python.exists() and stamp.exists() and stamp.read_text() == key):
        shutil.rmtree(home, ignore_errors=True)
        _build(base, home, lines)
        stamp.write_text(key)
        built = True
    versions = {**packages, **_installed(python, target.requirements)}
    return Env(python, base_version, versions, built)


def _npm(target: Target, cache: Path) -> dict[str, str]:
    """Install the target's npm pins under `<cache>/npm`; return their installed versions.

    The runs inherit this process's environment, so `LEASECHECK_NPM_DIR` tells every
    adapter where the pins live (the pin itself is in the target's own `env`).
    """
    if not target.npm:
        return {}
    root = cache / "npm"
    versions = {}
    try:
        for pin in target.npm:
            name = npm.name_of(pin)
            versions[name] = npm.installed_version(npm.ensure(pin, root), name)
    except npm.NpmError as exc:
        raise EnvError(str(exc)) from None
    os.environ["LEASECHECK_NPM_DIR"] = str(root)
    return versions


def _build(base: Path, home: Path, lines: tuple[str, ...]) -> None:
    """Create a venv at `home` from `base` and pip install `lines` into it."""
    _run([str(base), "-m", "venv", "--clear", str(home)], "creating the venv")
    pip = [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    pip += ["--disable-pip-version-check"]
    args = [arg for line in lines for arg in line.split(" ", 1)]
    _run([*pip, *args], f"pip install {' '.join(lines[1:])}")


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise EnvError(f"{what} failed: {last}")


def _installed(python: Path, requirements: tuple[str, ...]) -> dict[str, str]:
    """Return the versions of the pinned libraries and the harness's own, as installed."""
    names = [m.group(0) for r in requirements if (m := _NAME.match(r))]
    names += ["hypothesis", "psycopg"]
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    )
    done = subprocess.run(
        [str(python), "-c", code, *names], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise EnvError(f"{python}: cannot read installed versions of {', '.join(names)}")
    versions: dict[str, str] = json.loads(done.stdout)
    return versions
