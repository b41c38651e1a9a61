"""Write the conformance table: property x implementation, as Markdown and as JSON.

Cells: holds / violated (links to the counterexample's timeline, history and picture,
copied under the output directory), either "witnessed" (a script replayed it through
the library's own API: links to the script and its output) or "model only" (no
script, or it did not reproduce: the reason as a note) / not applicable (reason) /
error. Long reasons go to numbered notes under the table so the table stays readable.
Each column also carries what its final run exercised, per property (`exercised`)
and per situation (`situations`, so a zero is never hidden by a sum); null when none
was recorded. The page is rendered from the JSON (`matrix.markdown`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasecheck.stateful.properties import ALL, DESCRIPTIONS
from matrix import markdown
from matrix.envs import Env
from matrix.runs import Verdicts
from matrix.targets import Target
from matrix.witness import MODEL_ONLY, Witness


@dataclass(frozen=True)
class Column:
    """One implementation's results, as the report shows them."""

    target: Target
    env: Env | None
    verdicts: Verdicts
    seconds: float
    witnesses: dict[str, Witness] = field(default_factory=dict)
    unreached: tuple[str, ...] = ()
    """Properties this run did not find violated whose witness, run again, still showed it
    (`matrix.unreached`): violated cells, with the earlier run's counterexample files."""


def copy_counterexamples(column: Column, out: Path) -> dict[str, list[str]]:
    """Copy each violated property's files under `out`; return their paths relative to it."""
    copied: dict[str, list[str]] = {}
    for prop, files in column.verdicts.violated.items():
        home = out / "counterexamples" / column.target.name
        home.mkdir(parents=True, exist_ok=True)
        kept = []
        for source in files:
            dest = home / f"{prop}{source.suffix}"
            shutil.copyfile(source, dest)
            kept.append(dest)
        json_file = home / f"{prop}.json"
        if json_file.exists() and not (home / f"{prop}.svg").exists():
            kept += _svg(json_file)
        order = {".txt": 0, ".svg": 1, ".json": 2}
        kept.sort(key=lambda p: order.get(p.suffix, 3))
        copied[prop] = [str(p.relative_to(out)) for p in kept]
    return copied


def _svg(history: Path) -> list[Path]:
    """Draw the history as SVG next to it (the recorder may not write one yet)."""
    from leasecheck.stateful.story import svg

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = svg.main([str(history)])
    return [history.with_suffix(".svg")] if code == 0 else []


def cell(
    column: Column, prop: str, files: dict[str, list[str]], out: Path | None = None
) -> dict[str, Any]:
    """Return one cell of the table as data; paths are relative to the results directory."""
    v = column.verdicts
    if prop in v.violated or prop in column.unreached:
        witness = column.witnesses.get(prop, Witness(MODEL_ONLY, "no witness was run"))
        script = None
        if witness.script is not None:
            script = os.path.relpath(witness.script, out) if out else str(witness.script)
        output = None
        if witness.output is not None:
            output = f"witnesses/{column.target.name}/{prop}.txt"
        return {
            "verdict": witness.verdict,
            "files": files.get(prop, []),
            "witness": {"script": script, "output": output, "note": witness.note},
        }
    if prop in v.not_applicable:
        return {"verdict": "not applicable", "reason": v.not_applicable[prop]}
    if v.error is not None:
        return {"verdict": "error", "reason": v.error}
    return {"verdict": "holds"}


def as_data(
    columns: list[Column],
    meta: dict[str, Any],
    files: list[dict[str, list[str]]],
    out: Path | None = None,
) -> dict[str, Any]:
    """Return the whole matrix as the data `conformance.json` holds."""
    return {
        **meta,
        "properties": {p: DESCRIPTIONS[p] for p in ALL},
        "implementations": [
            {
                "name": c.target.name,
                "queue": c.target.queue,
                "requirements": list(c.target.requirements),
                "env": c.target.env,
                "client": c.target.client,
                "python": c.env.python_version if c.env else None,
                "versions": c.env.versions if c.env else {},
                "seconds": round(c.seconds, 1),
                "runs": c.verdicts.runs,
                "error": c.verdicts.error,
                "not_exercised": c.verdicts.not_exercised,
                "properties": {p: cell(c, p, f, out) for p in ALL},
                # The final run's situations per property; null: none recorded.
                "exercised": c.verdicts.exercised,
                # The same run's count of each situation, zeros named; null: none recorded.
                "situations": c.verdicts.situations,
            }
            for c, f in zip(columns, files, strict=True)
        ],
    }


def dumps(data: dict[str, Any]) -> str:
    """Return results data as the text of `conformance.json` (one format, so merges diff small)."""
    return json.dumps(data, indent=1) + "\n"


def as_json(
    columns: list[Column],
    meta: dict[str, Any],
    files: list[dict[str, list[str]]],
    out: Path | None = None,
) -> str:
    """Return the whole matrix as JSON."""
    return dumps(as_data(columns, meta, files, out))


def as_markdown(
    columns: list[Column],
    meta: dict[str, Any],
    files: list[dict[str, list[str]]],
    out: Path | None = None,
) -> str:
    """Return the matrix as a Markdown page, rendered from its JSON (`markdown.render`).

    Through the JSON, so that a page re-rendered from a results file (a merge of
    `--only`) is the page the run itself wrote.
    """
    return markdown.render(json.loads(as_json(columns, meta, files, out)))
