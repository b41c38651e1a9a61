"""Render a history for people: one lane per worker, simulated time down the page.

Each row is one answer (or event); a lane shows what its worker did, so a reader
sees at a glance who held which job when and whose completion went through.
"""

from __future__ import annotations

from leasecheck.stateful.history import Event, History
from leasecheck.stateful.story.claimtext import job_labels, saved_claim, short_label
from leasecheck.stateful.units import SECOND, stamp

_WIDTH = 30


def _describe(e: Event, jobs: dict[str, str]) -> str:
    what = e.op
    if e.job:
        what += f" {e.job}"
    if e.token is not None and e.op != "claim":
        what += f"#{e.token}"
    if e.kind == "ok":
        value = e.value
        if e.op in ("claim", "claim_many"):
            what += " -> nothing" if value in (None, []) else f" -> {_claims(value, jobs)}"
        elif e.op == "heartbeat" and value is None:
            what += " sent (no answer)"  # fire and forget: it answers nothing
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


def _claims(value: object, jobs: dict[str, str]) -> str:
    """Name the claims of an answer `job1#1`; a claim saved as its repr, cut to the column."""
    said = []
    for one in value if isinstance(value, list) else [value]:
        claim = saved_claim(one)
        if claim is None:
            said.append(str(one))
        else:
            said.append(
                short_label(jobs.get(str(claim.job_id), f"job?{claim.job_id}"), claim.token)
            )
    text = ", ".join(said)
    room = _WIDTH - len("claim -> ")
    return text if len(text) <= room else text[: room - 1] + "…"


def render(history: History, second: int) -> str:
    """Return the history as a text timeline with one lane per worker."""
    jobs = job_labels(history)
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
        text = _describe(e, jobs)
        cells[lanes.index(e.worker)] = text
        at = stamp(e.at * SECOND // second)
        lines.append(f"{at:>10} | " + " | ".join(f"{c:<{_WIDTH}}" for c in cells).rstrip())
    return "\n".join(lines)
