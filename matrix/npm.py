"""Pinned npm packages for the adapters of Node.js queues, installed once and reused.

A package pin such as `graphile-worker@0.18.0` is installed with the ordinary npm
client into `<root>/<pin>/node_modules` (the matrix's root is `<cache>/npm`). A stamp
file records what went into it (the pin and the node and npm versions); a directory
whose stamp differs is installed again from scratch. Install scripts are not run: the
adapters only read the packages' SQL. The pin is exact for the package itself; its
dependencies resolve as npm resolves them on the day (the adapters use none of them
for anything but producing the package's own SQL).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

STAMP = "leasecheck-npm-key"


class NpmError(RuntimeError):
    """The package could not be had; the message is one line that says why."""


def missing_tools() -> str | None:
    """Return why npm packages cannot be installed here (node or npm missing), or None."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH: install Node.js (20 or later) with npm"
    return None


def _tool_version(tool: str) -> str:
    done = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NpmError(f"{tool} --version failed: {done.stderr.strip() or done.returncode}")
    return done.stdout.strip()


def ensure(pin: str, root: Path) -> Path:
    """Return the `node_modules` directory holding `pin` ("name@version"), installing it once."""
    reason = missing_tools()
    if reason is not None:
        raise NpmError(reason)
    key = hashlib.sha256(
        "\n".join((pin, _tool_version("node"), _tool_version("npm"))).encode()
    ).hexdigest()
    home = root / pin
    modules = home / "node_modules"
    stamp = home / STAMP
    if modules.is_dir() and stamp.exists() and stamp.read_text() == key:
        return modules
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    command = ["npm", "install", "--prefix", str(home), "--no-save", "--ignore-scripts"]
    command += ["--no-audit", "--no-fund", "--loglevel=error", pin]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else f"exit status {done.returncode}"
        shutil.rmtree(home, ignore_errors=True)
        raise NpmError(f"npm install {pin} failed: {last}")
    stamp.write_text(key)
    return modules


def installed_version(modules: Path, name: str) -> str:
    """Return the version of package `name` as installed under `modules`."""
    manifest = modules / name / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        raise NpmError(f"{manifest}: not an installed npm package") from None


def name_of(pin: str) -> str:
    """Return the package name of a pin ("@scope/x@1.0" -> "@scope/x")."""
    name, sep, _ = pin.rpartition("@")
    return name if sep and name else pin
