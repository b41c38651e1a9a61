"""Merge a `--only` run's columns into the results already in the output directory.

A run of some columns used to overwrite `conformance.json` and `.md` with just those
columns, so adding one library meant merging the files by hand. Now each column run
replaces the column of the same name (a new one takes its place in `targets.TARGETS`'s
order), every other column and the file's own header stay as they were (byte for byte
in the JSON: it is read and written back in the one format, `report.dumps`), and the
run's own header goes under `columns_run_apart`, which the page names under its own.
The page is then re-rendered from the merged JSON (`markdown.render`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from leasecheck.dbfixtures import embedded
from matrix import report, targets

META = ("date", "postgres", "profile", "python", "seconds")
"""The header fields a run writes at the top of its JSON, kept per column run apart."""


class ResultsError(ValueError):
    """The results file to merge into cannot be read as results; the message says which."""


def load(path: Path, postgres: str | None = None) -> dict[str, Any] | None:
    """Return the results in `path`, or None if there is no such file.

    With `postgres` (the server's version), a file of another major is refused: each
    major's results have a directory of their own (`majors.results_dir`).
    """
    if not path.exists():
        return None
    try:
        text = path.read_text()
        data = json.loads(text)
        names = [impl["name"] for impl in data["implementations"]]
        missing = [k for k in (*META, "properties") if k not in data]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResultsError(f"cannot merge into {path}: {exc!r}") from exc
    if missing or len(set(names)) != len(names):
        raise ResultsError(f"cannot merge into {path}: missing {missing} or a column twice")
    if report.dumps(data) != text:
        # Written back, every column would change: the merge would not be a column's diff.
        raise ResultsError(
            f"cannot merge into {path}: not in the format the matrix writes "
            "(json.dumps(data, indent=1) and a newline); write it back so first"
        )
    if postgres is not None:
        _same_major(str(path), str(data["postgres"]), postgres)
    return dict(data)


def _same_major(where: str, theirs: str, ours: str) -> None:
    """Raise ResultsError unless both versions are of one major: a column is one server's."""
    if embedded.major(theirs) != embedded.major(ours):
        raise ResultsError(
            f"cannot merge a run on PostgreSQL {ours} into {where}, from PostgreSQL {theirs}"
        )


def merge(previous: dict[str, Any], run: dict[str, Any], command: str) -> dict[str, Any]:
    """Return `previous` with the columns of `run` in place of theirs, `run`'s header kept apart.

    Neither argument is changed. Each merged column's entry under `columns_run_apart`
    is replaced (and moves last, so the page lists the runs in the order they were
    merged); a hand-written `note` on an earlier entry went with the run it described.
    """
    _same_major("the results", str(previous["postgres"]), str(run["postgres"]))
    merged = copy.deepcopy(previous)
    impls: list[dict[str, Any]] = merged["implementations"]
    apart: dict[str, Any] = merged.setdefault("columns_run_apart", {})
    header = {k: run[k] for k in META}
    header["seconds"] = round(float(header["seconds"]), 1)
    header["command"] = command
    # The run's properties in its order, then any it no longer knows; old texts kept.
    texts = {**run["properties"], **merged["properties"]}
    order = [*run["properties"], *(p for p in merged["properties"] if p not in run["properties"])]
    merged["properties"] = {p: texts[p] for p in order}
    for column in run["implementations"]:
        name = column["name"]
        at = next((i for i, impl in enumerate(impls) if impl["name"] == name), None)
        if at is None:
            impls.insert(_position(impls, name), copy.deepcopy(column))
        else:
            impls[at] = copy.deepcopy(column)
        apart.pop(name, None)
        apart[name] = dict(header)
    return merged


def _position(impls: list[dict[str, Any]], name: str) -> int:
    """Return where a new column goes: before the first column declared after it."""
    order = {t.name: i for i, t in enumerate(targets.TARGETS)}
    rank = order.get(name, len(order))
    later = (i for i, impl in enumerate(impls) if order.get(impl["name"], len(order)) > rank)
    return next(later, len(impls))
