"""A witnessed violation that a new run did not reach stays violated while its witness shows it.

A run judges a column afresh, and its derandomized search need not meet a path an
earlier run met. A "holds" over a cell whose witness still reproduces the violation
through the library's own code would be a false promise (and a merge once replaced
such a cell and deleted its counterexample). So the witness of every holding property
that has one is run again: one that still shows the violation keeps the cell
"violated (witnessed)", with the earlier run's counterexample files carried over; one
that no longer does lets "holds" stand, and the run's summary says so.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from matrix import targets, witness

NOTE = (
    "this run's draws did not reach it; its witness, run again through the library's "
    "own code, still shows it, and the counterexample files are the earlier run's: "
)


def rewitness(
    python: Path, target: targets.Target, holds: list[str], dsn: str, scripts: Path | None = None
) -> dict[str, witness.Witness]:
    """Return the witness, run again, of every holding property of `target` that has a script."""
    home = witness.SCRIPTS if scripts is None else scripts
    found = {}
    for prop in holds:
        if witness.script_for(target.name, prop, home).exists():
            shown = witness.check(python, target, prop, dsn, home)
            if shown.verdict == witness.WITNESSED:
                shown = replace(shown, note=NOTE + shown.note)
            found[prop] = shown
    return found


def read(out: Path, column: str, props: list[str]) -> dict[str, dict[str, bytes]]:
    """Return the earlier results' counterexample files (path relative to `out` -> bytes) of
    `column`'s witnessed cells among `props`, read before the column's files are replaced."""
    try:
        data = json.loads((out / "conformance.json").read_text())
        impl = next(i for i in data["implementations"] if i["name"] == column)
        cells = dict(impl["properties"])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return {}  # no earlier results for this column: nothing to carry
    carried = {}
    for prop in props:
        cell = cells.get(prop) or {}
        if cell.get("verdict") == witness.WITNESSED:
            files = [str(f) for f in cell.get("files", [])]
            carried[prop] = {f: (out / f).read_bytes() for f in files if (out / f).is_file()}
    return carried


def restore(carried: dict[str, dict[str, bytes]], out: Path) -> dict[str, list[str]]:
    """Write the carried files back under `out`; return each property's paths relative to it."""
    for files in carried.values():
        for relative, content in files.items():
            path = out / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    return {prop: list(files) for prop, files in carried.items()}
