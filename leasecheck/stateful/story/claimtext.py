"""Claims as a history saved them: read back, and named short (`job1#1`).

The history saves a claim answer as `{"job_id", "token", "worker"}`, whatever the
queue's claim type; files written before that was so for a user's own claim type (a
dataclass, a tuple) saved its repr instead, and only the judge's grant fact for that
answer says its job and token. Pictures and timelines name a claim `job1#1`: the job's
label and the token, never the repr, which would not fit a column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from leasecheck.stateful.history import History

TOKEN_CHARS = 12
"""A longer token is cut in labels (the whole one stays in titles and data)."""


@dataclass(frozen=True)
class SavedClaim:
    """The claim one saved answer names."""

    job_id: Any
    token: str | None
    """As the history's other lines name it (their `token` field)."""
    worker: str | None


def token_text(token: object) -> str:
    """A token as text: a string as it is (the history saves tokens as their repr), else JSON."""
    return token if isinstance(token, str) else json.dumps(token, default=str)


def saved_claim(value: object) -> SavedClaim | None:
    """Return the claim a saved claim answer names, or None when it names none readably."""
    if not isinstance(value, dict) or "job_id" not in value:
        return None
    token, worker = value.get("token"), value.get("worker")
    return SavedClaim(
        job_id=value["job_id"],
        token=None if token is None else token_text(token),
        worker=None if worker is None else str(worker),
    )


_DATETIME = re.compile(r"datetime\.datetime\(\d+, \d+, \d+, (\d+), (\d+)(?:, (\d+))?(?:, (\d+))?")
_UUID = re.compile(r"UUID\('[0-9a-f-]*([0-9a-f]{8})'\)")
_DECIMAL = re.compile(r"Decimal\('([^']*)'\)")


def short_token(text: str) -> str:
    """A token's repr as a column shows it: a timestamp by its time of day, a UUID by its
    last 8 digits (a time-ordered one's first digits are the same for every claim), a
    decimal by its digits; anything else longer than `TOKEN_CHARS` cut."""
    if m := _DATETIME.match(text):
        hour, minute, second, micro = (int(g) if g else 0 for g in m.groups())
        text = f"{hour:02}:{minute:02}:{second:02}" + (f".{micro:06}" if micro else "")
    elif m := _UUID.fullmatch(text):
        text = "…" + m.group(1)
    elif m := _DECIMAL.fullmatch(text):
        text = m.group(1)
    if len(text) > TOKEN_CHARS + 3:  # a time of day with microseconds fits
        text = text[: TOKEN_CHARS - 1] + "…"
    return text


def short_label(job: str, token: object) -> str:
    """`job1#1`: the job's label and its token, shown short to fit a column."""
    return f"{job}#{'?' if token is None else short_token(token_text(token))}"


def job_labels(history: History) -> dict[str, str]:
    """Map each enqueued job's id (as text) to its label, from the history's enqueue answers."""
    return {
        str(e.value): e.job
        for e in history.events
        if e.op == "enqueue" and e.kind == "ok" and e.job is not None
    }
