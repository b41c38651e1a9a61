"""The matrix reads which property a run violated from the failure's history, not its name."""

from __future__ import annotations

import json
from pathlib import Path

from matrix import runs


def _failure(directory: Path, stem: str, prop: str) -> None:
    (directory / f"{stem}.json").write_text(json.dumps({"property": prop, "program": []}))
    (directory / f"{stem}.txt").write_text(f"[{prop}] ...\n")


def test_a_dotted_queue_name_does_not_hide_the_property(tmp_path: Path) -> None:
    """`chancy-0.25.1-fencing-1234abcd` cut to `chancy-0.25` by with_suffix is still fencing."""
    _failure(tmp_path, "chancy-0.25", "fencing")
    _failure(tmp_path, "pgqueuer-single-completion-1234abcd", "single-completion")
    (tmp_path / "notes.json").write_text("[1, 2]")
    found = runs._violations(tmp_path)
    assert sorted(found) == ["fencing", "single-completion"]
    assert [p.name for p in found["fencing"]] == ["chancy-0.25.json", "chancy-0.25.txt"]


def test_no_histories_no_violations(tmp_path: Path) -> None:
    """An empty failures directory (or none) names no property."""
    assert runs._violations(tmp_path) == {}
    assert runs._violations(tmp_path / "missing") == {}
