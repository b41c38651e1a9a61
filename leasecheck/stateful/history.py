"""The record of every operation: invoke, then ok, fail or info.

`info` means the outcome is unknown (the connection died under the call). The same
record feeds the invariants' report, the JSON file a failing run leaves behind and
the timeline. It holds plain values only, so it serialises as it is.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["invoke", "ok", "fail", "info", "event"]


@dataclass(frozen=True)
class Event:
    """One line of history; `at` is simulated seconds since the start of the example."""

    seq: int
    at: float
    worker: str
    op: str
    kind: Kind
    job: str | None = None
    token: str | None = None
    value: Any = None
    note: str = ""


@dataclass
class History:
    """An append-only list of events."""

    events: list[Event] = field(default_factory=list)

    def add(self, at: float, worker: str, op: str, kind: Kind, **fields: Any) -> Event:
        event = Event(seq=len(self.events), at=at, worker=worker, op=op, kind=kind, **fields)
        self.events.append(event)
        return event

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(e) for e in self.events]

    def write(self, path: Path, extra: dict[str, Any]) -> None:
        """Write the history, with `extra` facts about the run, as JSON."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**extra, "history": self.to_json()}, indent=1, default=str))
