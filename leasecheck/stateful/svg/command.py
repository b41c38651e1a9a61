"""`leasecheck svg FILE.json`: read a failure file and draw it."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from leasecheck.stateful.history import Event, History
from leasecheck.stateful.judge import Judge, rejudge
from leasecheck.stateful.svg.render import render_svg
from leasecheck.stateful.units import SECOND


def load(path: Path) -> tuple[History, Judge, str | None, str | None]:
    """Read a history file the recorder wrote; return the history, the judge that judged
    its saved facts again, the violation and the property."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise ValueError("not a leasecheck history: expected a JSON object with a 'history' list")
    if not isinstance(data.get("judge"), dict):
        raise ValueError(
            "it has no judge's facts (written by an older leasecheck); replay its "
            "program with `leasecheck replay` to get a file that has them"
        )
    names = {f.name for f in fields(Event)}
    events = [Event(**{k: v for k, v in e.items() if k in names}) for e in data["history"]]
    judge = rejudge(data["judge"])
    return History(events=events), judge, data.get("violation"), data.get("property")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Draw a history as an SVG picture: who held which lease when, "
        "and whose completion won."
    )
    parser.add_argument("history", type=Path, help="a .leasecheck/*.json file a failing run left")
    parser.add_argument("-o", "--out", type=Path, help="where to write (default: HISTORY.svg)")
    args = parser.parse_args(argv)
    try:
        history, judge, violation, prop = load(args.history)
    except (OSError, ValueError, TypeError) as exc:
        print(f"leasecheck svg: {args.history}: {exc}", file=sys.stderr)
        return 2
    out = args.out or args.history.with_suffix(".svg")
    out.write_text(render_svg(history, judge, violation, prop, SECOND), encoding="utf-8")
    print(f"wrote {out}")
    return 0
