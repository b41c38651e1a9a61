"""Carries out a plan's faults against the workers and the server, and counts what landed.

A fault whose target has no running process at that moment (it died and is being
replaced) is counted as missed, not injected; so is a cut that found no backend.
It never heals: the soak resumes paused workers when the chaos ends.
"""

from __future__ import annotations

from collections import Counter

from chaos.database import Database
from chaos.plan import Fault, Plan
from chaos.pool import Pool
from leasecheck.dbfixtures.embedded import EmbeddedServer


class Nemesis:
    """Fires the plan's faults in time order as the chaos clock passes them."""

    def __init__(self, plan: Plan, pool: Pool, db: Database, server: EmbeddedServer | None) -> None:
        self.plan = plan
        self.pool = pool
        self.db = db
        self.server = server
        self.injected: Counter[str] = Counter()
        self.missed: Counter[str] = Counter()
        self.backends_terminated = 0
        self._next = 0

    @property
    def scheduled(self) -> Counter[str]:
        """The faults the plan held up to where the chaos stopped."""
        return Counter(f.kind for f in self.plan.faults[: self._next])

    def step(self, elapsed: float) -> None:
        """Fire every fault due by `elapsed` seconds of chaos."""
        faults = self.plan.faults
        while self._next < len(faults) and faults[self._next].at <= elapsed:
            fault = faults[self._next]
            self._next += 1
            if self._fire(fault):
                self.injected[fault.kind] += 1
            else:
                self.missed[fault.kind] += 1

    def _fire(self, fault: Fault) -> bool:
        if fault.kind == "pause":
            return self.pool.pause(fault.slot, fault.seconds)
        if fault.kind == "kill":
            return self.pool.kill(fault.slot)
        if fault.kind == "cut":
            slot = self.pool.slots[fault.slot]
            if not slot.alive():
                return False
            ended = self.db.cut(slot.application_name)
            self.backends_terminated += ended
            return ended > 0
        if fault.kind == "restart":
            if self.server is None:
                return False
            self.db.close()
            self.server.restart()
            return True
        raise ValueError(f"unknown fault kind {fault.kind!r}")
