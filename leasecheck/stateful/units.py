"""Simulated time's units and the harness's fixed durations (integer microseconds)."""

from __future__ import annotations

MILLISECOND = 1_000
"""The resolution of a queue that stores epoch milliseconds: a move of the clock one
millisecond off a lease end crosses its boundary however that queue rounds it."""
SECOND = 1_000_000
LEASE = 30 * SECOND
"""The lease every claim asks for."""
BEAT = 10 * SECOND
"""How often a running worker's heartbeat fires."""
ROUNDED = 2 * SECOND
"""How far past a lease end the clock must move to be past it for a queue that rounds
to whole seconds both the end it stores and the `now()` it compares with (floor, ceil or
nearest, `<` or `<=`): the end it stores is below the true end plus 1 s, the instant it
reads is above the true instant minus 1 s, so 2 s clear both (1.5 s would not: an end at
30.000001 s stored as 31 s is still ahead of a `now()` of 31.500001 s floored to 31 s)."""


def stamp(us: float) -> str:
    """Return simulated microseconds as a story writes them: `30s`, `30.000001s`, `0.001s`.

    Exact to the microsecond, never rounded and never in exponent form: a claim a
    microsecond past a lease end at 30 s must not read as a claim at 30 s."""
    whole, part = divmod(round(us), SECOND)
    return f"{whole}s" if not part else f"{whole}.{part:06d}".rstrip("0") + "s"
