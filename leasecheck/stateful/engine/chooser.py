"""Who makes a worker's own move: the engine's one choice of schedule, behind one protocol.

Every rule names its worker (or claim) with a small `pick` into the list of those that
may act; where the pick comes from is the caller's (Hypothesis draws it, the explorer
enumerates it, a program replays it). A worker's own moves (claims, completions,
heartbeats, failure reports, effects, transactions) may instead follow a schedule of
the engine's: the `Chooser` narrows the candidates to one worker's slot, or leaves the
pick to decide. After Shuttle's `Scheduler` (one narrow trait, a strategy per file):
`Drawn` here, and `Priorities` (PCT) in `stateful.engine.priorities`. Faults (pauses,
crashes, cuts, preemptions) always fall where the pick says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Chooser(Protocol):
    def among(self, slots: Sequence[str]) -> str | None:
        """Return the slot (`w0`, `w1`, ...) whose worker makes the next own move among
        `slots` (each candidate's), or None: the step's pick decides."""
        ...

    def step(self) -> None:
        """A step has ended."""
        ...


class Drawn:
    """The pick decides every move: uniform under Hypothesis, each in turn under the
    explorer, as recorded under a replay."""

    def among(self, slots: Sequence[str]) -> str | None:
        return None

    def step(self) -> None:
        pass
