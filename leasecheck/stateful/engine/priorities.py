"""Priority schedules, after PCT (Burckhardt et al., ASPLOS 2010), over the workers.

By default each rule picks its worker with a drawn index, so every eligible worker
is as likely to act as any other, step after step. PCT instead gives the workers
distinct priorities and lets the highest-priority eligible worker make each move;
at up to d-1 change points (steps drawn uniformly), the worker that acted last drops
below every other. A worker thus runs long stretches alone and is overtaken at a few
chosen moments: a bug that needs d ordering constraints among n workers over k
steps is hit with probability at least 1/(n k^(d-1)) per example, however rare the
interleaving is under uniform picks. Only a worker's own moves follow priorities
(claims, completions, heartbeats, failure reports, effects, transactions); faults
(pauses, crashes, cuts, preemptions) still fall where the drawn index says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

DEPTH = 3
"""d: at most d-1 = 2 change points (the bugs CHESS found needed at most 2 preemptions)."""


@dataclass
class Priorities:
    """The workers' priorities in one example, and where they change."""

    order: Sequence[int]
    changes: Sequence[int]
    steps: int = 0
    last: str | None = None
    """The slot (`w0`, `w1`, ...) of the worker that made the last own move."""
    dropped: dict[str, int] = field(default_factory=dict)

    def of(self, slot: str) -> int:
        """Return the slot's priority now: its drawn one, or below all after a change."""
        if slot in self.dropped:
            return self.dropped[slot]
        return len(self.changes) + self.order[int(slot.removeprefix("w"))]

    def step(self) -> None:
        """Count a step; at a change point, the last worker to act drops below every other."""
        self.steps += 1
        if self.steps in self.changes and self.last is not None:
            rank = sorted(self.changes).index(self.steps)
            self.dropped[self.last] = len(self.changes) - 1 - rank

    def among(self, slots: Sequence[str]) -> str:
        """Return the slot of highest priority among `slots`, and remember it acted
        (`stateful.engine.chooser.Chooser`)."""
        self.last = max(slots, key=self.of)
        return self.last
