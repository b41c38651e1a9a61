"""Render a history for people: one lane per worker, simulated time down the page.

Each row is one answer (or event); a lane shows what its worker did, so a reader
sees at a glance who held which job when and whose completion went through.
"""

from __future__ import annotations

from leasecheck.stateful.history import Event, History

_WIDTH = 30


def _describe(e: Event) -> str:
    what = e.op
    if e.job:
        what += f" {e.job}"
    if e.token is not None and e.op != "claim":
        what += f"#{e.token}"
    if e.kind == "ok":
        value = e.value
        if e.op == "claim":
            what += " -> nothing" if value is None else f" -> {_claim(value)}"
        elif e.op in ("complete", "heartbeat", "fail"):
            what += " ACCEPTED" if value is True else " rejected"
        elif e.op == "send" and isinstance(value, dict):
            what += " delivered" if value.get("accepted") else " deduplicated"
    elif e.kind == "fail":
        what += f" ERROR {e.note}"
    elif e.kind == "info":
        what += " ?? (connection died)"
    elif e.kind == "event":
        what = (
            e.op
            + (f" {e.value}" if e.value is not None else "")
            + (f" ({e.note})" if e.note else "")
        )
    return what


def _claim(value: object) -> str:
    if isinstance(value, dict):
        return f"token {value.get('token')}"
    return str(value)


def render(history: History, second: int) -> str:
    """Return the history as a text timeline with one lane per worker."""
    lanes: list[str] = []
    for e in history.events:
        lane = e.worker
        if lane not in lanes:
            lanes.append(lane)
    header = f"{'time':>10} | " + " | ".join(f"{lane:<{_WIDTH}}" for lane in lanes)
    lines = ["timeline (simulated time; one lane per worker):", header, "-" * len(header)]
    for e in history.events:
        if e.kind == "invoke":
            continue
        cells = [""] * len(lanes)
        text = _describe(e)
        cells[lanes.index(e.worker)] = text
        at = f"{e.at / second:g}s"
        lines.append(f"{at:>10} | " + " | ".join(f"{c:<{_WIDTH}}" for c in cells).rstrip())
    return "\n".join(lines)
