"""SQL produced by an installed npm package's own code, run on the harness's connection.

The adapters of Node.js queues never type the library's SQL: a small script shipped in
`leasecheck/adapters/npm/` imports the installed package, calls its own migration and
query-building code against a recording client, and prints each statement it would
send (text with `$n` placeholders, and the values it passed) as JSON. That runs once
per process; the statements then run on the harness's psycopg connection through a
`RawCursor`, which takes PostgreSQL's own `$n` placeholders unchanged.

Where the package lives: `LEASECHECK_NPM_DIR` (the directory `matrix.npm` installs
into) joined with `LEASECHECK_NPM_PIN` ("graphile-worker@0.18.0"), or
`LEASECHECK_NODE_MODULES` naming a `node_modules` directory outright.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg import Connection, RawCursor

SCRIPTS = Path(__file__).with_name("npm")


class NodeError(RuntimeError):
    """The package or node is not available; the message is one line that says why."""


@dataclass(frozen=True)
class Statement:
    """One statement the package's code sent: its text and the values it passed."""

    text: str
    values: tuple[Any, ...]
    threw: bool = False

    @classmethod
    def of(cls, data: dict[str, Any]) -> Statement:
        return cls(data["text"], tuple(data.get("values") or ()), bool(data.get("threw")))

    def replace(self, old: str, new: str, count: int = 1) -> Statement:
        """Return the statement with `old` replaced by `new`, which must occur `count` times."""
        found = self.text.count(old)
        if found != count:
            raise NodeError(f"expected {count} x {old!r} in the package's SQL, found {found}")
        return Statement(self.text.replace(old, new), self.values, self.threw)


def node_modules(package: str) -> Path:
    """Return the `node_modules` directory the environment names, holding `package`."""
    direct = os.environ.get("LEASECHECK_NODE_MODULES")
    root, pin = os.environ.get("LEASECHECK_NPM_DIR"), os.environ.get("LEASECHECK_NPM_PIN")
    if direct:
        modules = Path(direct)
    elif root and pin:
        modules = Path(root) / pin / "node_modules"
    else:
        raise NodeError(
            f"{package}: set LEASECHECK_NPM_DIR and LEASECHECK_NPM_PIN (python -m matrix does) "
            "or LEASECHECK_NODE_MODULES to where the npm package is installed"
        )
    if not (modules / package / "package.json").is_file():
        raise NodeError(f"{package} is not installed under {modules}")
    return modules


@functools.cache
def produce(script: str, modules: Path, *args: str) -> dict[str, Any]:
    """Return what `script` prints for the package under `modules` (once per process and args)."""
    node = shutil.which("node")
    if node is None:
        raise NodeError("node not found on PATH: install Node.js (20 or later)")
    done = subprocess.run(
        [node, str(SCRIPTS / script), str(modules), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        raise NodeError(f"node {script} failed: {lines[-1] if lines else done.returncode}")
    produced: dict[str, Any] = json.loads(done.stdout)
    return produced


def run(
    conn: Connection[Any], text: str, values: tuple[Any, ...] | list[Any] = ()
) -> RawCursor[Any]:
    """Execute one statement with `$n` placeholders on `conn`; return its cursor."""
    cursor = RawCursor(conn)
    cursor.execute(text, list(values) if values else None)
    return cursor


def replay(conn: Connection[Any], statements: list[Statement]) -> None:
    """Run recorded migration statements in one transaction, as the package's migrate() would.

    Its own `begin`/`commit` become the one transaction, and probes that the recording
    answered with "does not exist" (to make the package install its schema) are skipped.
    """
    with conn.transaction():
        for stmt in statements:
            if stmt.threw or stmt.text.strip().lower() in ("begin", "commit"):
                continue
            run(conn, stmt.text, stmt.values)
