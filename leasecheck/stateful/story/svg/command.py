"""`leasecheck svg FILE.json`: read a failure file and draw it.

The recorder draws the picture it saves from the file it has just written, through
`draw`, so the picture a run leaves and the one `leasecheck svg` redraws are the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from leasecheck.stateful.history import Event, History
from leasecheck.stateful.story.svg.evidence import Refs
from leasecheck.stateful.story.svg.render import render_svg
from leasecheck.stateful.units import SECOND
from leasecheck.stateful.verdict.judge import Judge, rejudge


@dataclass(frozen=True)
class Saved:
    """What a failure file holds that the picture draws."""

    history: History
    judge: Judge
    """The judge that judged the file's saved facts again: its leases are the bars."""
    violation: str | None
    prop: str | None
    refs: Refs | None
    """The file's `violation_refs`; None in a file older than them."""


def read(path: Path) -> Saved:
    """Read a failure file the recorder wrote; raise ValueError if it is not one."""
    data: Any = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise ValueError("not a leasecheck history: expected a JSON object with a 'history' list")
    if not isinstance(data.get("judge"), dict):
        raise ValueError(
            "it has no judge's facts (written by an older leasecheck); replay its "
            "program with `leasecheck replay` to get a file that has them"
        )
    names = {f.name for f in fields(Event)}
    events = [Event(**{k: v for k, v in e.items() if k in names}) for e in data["history"]]
    refs = data.get("violation_refs")
    return Saved(
        history=History(events=events),
        judge=rejudge(data["judge"]),
        violation=data.get("violation"),
        prop=data.get("property"),
        refs=None if refs is None else Refs.read(refs),
    )


def load(path: Path) -> tuple[History, Judge, str | None, str | None]:
    """Read a failure file: its history, the judge of its facts, its violation and property."""
    saved = read(path)
    return saved.history, saved.judge, saved.violation, saved.prop


def draw(path: Path) -> str:
    """Return the picture of a failure file, as `leasecheck svg` draws it."""
    s = read(path)
    return render_svg(s.history, s.judge, s.violation, s.prop, SECOND, refs=s.refs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Draw a history as an SVG picture: who held which lease when, "
        "and whose completion won."
    )
    parser.add_argument("history", type=Path, help="a .leasecheck/*.json file a failing run left")
    parser.add_argument("-o", "--out", type=Path, help="where to write (default: HISTORY.svg)")
    args = parser.parse_args(argv)
    try:
        picture = draw(args.history)
    except (OSError, ValueError, TypeError) as exc:
        print(f"leasecheck svg: {args.history}: {exc}", file=sys.stderr)
        return 2
    out = args.out or args.history.with_suffix(".svg")
    out.write_text(picture, encoding="utf-8")
    print(f"wrote {out}")
    return 0
