"""Compare the matrix's verdicts across PostgreSQL majors, and flag every cell that differs.

`python -m matrix` writes the default major's results (the embedded wheel's) to
`OUT/conformance.json` and `.md`, and another major's, in the same format with their
own counterexamples, under `OUT/pg<N>/`. This module reads whichever are there and writes
`conformance-majors.md` and `.json`: for each implementation run on more than one
major, each property's verdict per major, with the cells whose verdicts differ
marked. It reads only the JSON files, so runs made at different times compare too
(each file's date is shown).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BASE = "conformance"
STEM = "conformance-majors"


def results_dir(out: Path, major: int, default_major: int) -> Path:
    """Return where a run on `major` writes its tables: `out`, or `out/pg<N>` for another."""
    return out if major == default_major else out / f"pg{major}"


@dataclass(frozen=True)
class Results:
    """One major's results file, as read."""

    file: str
    """its Markdown page, relative to the output directory"""
    postgres: str
    date: str
    verdicts: dict[str, dict[str, str]]
    """implementation -> property -> verdict"""


def _base(verdict: str) -> str:
    """Return the verdict without its witness state: majors are compared on the verdict."""
    return "violated" if verdict.startswith("violated") else verdict


def load(out: Path) -> list[Results]:
    """Return every results file in `out`, the default major's first, then by file name."""
    files = [out / f"{BASE}.json", *sorted(out.glob(f"pg*/{BASE}.json"))]
    found = []
    for path in files:
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        verdicts = {
            impl["name"]: {p: _base(cell["verdict"]) for p, cell in impl["properties"].items()}
            for impl in data["implementations"]
        }
        page = path.with_suffix(".md").relative_to(out)
        found.append(Results(str(page), str(data["postgres"]), str(data["date"]), verdicts))
    return found


def _label(results: Results) -> str:
    """Return the major's short label: the version's first word ('15.18', '18.6')."""
    return results.postgres.split()[0]


def differences(found: list[Results]) -> list[dict[str, Any]]:
    """Return one entry per (implementation, property) whose verdicts differ between majors."""
    diffs = []
    for impl, props in _shared(found).items():
        for prop in props:
            by_major = {
                _label(r): r.verdicts[impl][prop] for r in found if prop in r.verdicts.get(impl, {})
            }
            if len(set(by_major.values())) > 1:
                diffs.append({"implementation": impl, "property": prop, "verdicts": by_major})
    return diffs


def _counts(found: list[Results]) -> tuple[int, int]:
    """Return how many shared cells were compared, and how many are an error on every major.

    An error on every major is no agreement: such a cell compares nothing.
    """
    compared = errored = 0
    for impl, props in _shared(found).items():
        for prop in props:
            seen = {r.verdicts[impl][prop] for r in found if prop in r.verdicts.get(impl, {})}
            if seen == {"error"}:
                errored += 1
            else:
                compared += 1
    return compared, errored


def _shared(found: list[Results]) -> dict[str, list[str]]:
    """Return the implementations run on at least two majors, with their properties, in order."""
    shared: dict[str, list[str]] = {}
    for results in found:
        for impl, props in results.verdicts.items():
            if impl not in shared and sum(impl in r.verdicts for r in found) > 1:
                shared[impl] = list(props)
    return shared


def as_json(found: list[Results]) -> str:
    """Return the comparison as JSON."""
    compared, errored = _counts(found)
    data = {
        "majors": [{"file": r.file, "postgres": r.postgres, "date": r.date} for r in found],
        "compared": compared,
        "errors_on_every_major": errored,
        "differences": differences(found),
    }
    return json.dumps(data, indent=1) + "\n"


def summary(found: list[Results]) -> str:
    """Return one sentence: how many cells differ, of how many compared."""
    diffs = differences(found)
    compared, errored = _counts(found)
    line = f"{len(diffs)} of {compared} cells differ"
    if errored:
        line += f"; {errored} are an error on every major and compare nothing"
    return line + "."


def as_markdown(found: list[Results]) -> str:
    """Return the comparison as a Markdown page: one table, differing cells in bold."""
    shared = _shared(found)
    diffs = {(d["implementation"], d["property"]) for d in differences(found)}
    lines = ["# Verdicts across PostgreSQL majors", ""]
    lines += [f"- PostgreSQL {r.postgres}: [{r.file}]({r.file}) ({r.date})" for r in found]
    lines += ["", summary(found)]
    if not shared:
        return "\n".join(lines) + "\n"
    impls = list(shared)
    props = list(dict.fromkeys(p for ps in shared.values() for p in ps))
    lines += ["", "| property | " + " | ".join(impls) + " |"]
    lines.append("|---" * (len(impls) + 1) + "|")
    for prop in props:
        row = []
        for impl in impls:
            verdicts = [(_label(r), r.verdicts.get(impl, {}).get(prop, "-")) for r in found]
            if (impl, prop) in diffs:
                row.append("**differs**: " + "; ".join(f"{m} {v}" for m, v in verdicts if v != "-"))
            else:
                row.append(next(v for _, v in verdicts if v != "-"))
        lines.append(f"| {prop} | " + " | ".join(row) + " |")
    alone = [f"{impl} ({_label(r)})" for r in found for impl in r.verdicts if impl not in shared]
    if alone:
        lines += ["", "Run on one major only, not compared: " + ", ".join(alone) + "."]
    return "\n".join(lines) + "\n"


def write(out: Path) -> tuple[str, list[dict[str, Any]]] | None:
    """Write the comparison beside the results in `out`; return its summary and differences.

    Returns None (and writes nothing) when `out` holds fewer than two majors' results.
    """
    found = load(out)
    if len(found) < 2:
        return None
    (out / f"{STEM}.json").write_text(as_json(found))
    (out / f"{STEM}.md").write_text(as_markdown(found))
    return summary(found), differences(found)
