"""The files a failing run leaves: the program, its history, a timeline and a picture."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasecheck.stateful.history import History
from leasecheck.stateful.program import FORMAT, Step, digest, to_json
from leasecheck.stateful.properties import Violation
from leasecheck.stateful.story.parted import Stories
from leasecheck.stateful.story.svg import draw


@dataclass(frozen=True)
class Failure:
    """One failing example: what broke, the program that broke it, and its history."""

    violation: Violation
    program: tuple[Step, ...]
    history: History
    timeline: str
    judged: dict[str, Any]
    """The judge's rules and facts (`Judge.to_json`): all the verdict rests on."""


@dataclass
class Recorder:
    """Keeps the last failing example per property, for the files a failing run leaves,
    and the latest examples' stories, to say where two runs of one program parted."""

    last: dict[str, Failure] = field(default_factory=dict)
    stories: Stories = field(default_factory=Stories)

    def write(
        self, directory: Path, queue: str, spec: str, excused: Iterable[str] = ()
    ) -> list[Path]:
        """Write each failure as JSON (program, history, the judge's facts, the properties
        the run excused, so a replay judges as the run did), its story as text (the
        verdict, then the timeline) and an SVG.

        Files are named by queue, property and a hash of the program, so runs of two
        queues, or two different failures, never overwrite each other.
        """
        written: list[Path] = []
        for prop, failure in self.last.items():
            steps = list(failure.program)
            stem = f"{_file_safe(queue)}-{prop}-{digest(steps)}"
            paths = {s: directory / f"{stem}{s}" for s in (".json", ".txt", ".svg")}
            facts = {
                "format": FORMAT,
                "queue": queue,
                "queue_spec": spec,
                "property": prop,
                "excused": sorted(excused),
                "violation": str(failure.violation),
                "violation_refs": failure.violation.refs(),
                "program": to_json(steps),
                "judge": failure.judged,
            }
            failure.history.write(paths[".json"], facts)
            # the story as the run told it: the verdict first, then how it came about
            paths[".txt"].write_text(f"{failure.violation}\n{failure.timeline}\n")
            # drawn from the file just written, as `leasecheck svg` redraws it: the
            # picture shows what the saved facts (and any key added to them) say
            paths[".svg"].write_text(draw(paths[".json"]), encoding="utf-8")
            written += paths.values()
        return written


def _file_safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name) or "queue"
