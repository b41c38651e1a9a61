"""The soak's worker processes: one slot per worker, each holding its current process.

A slot is refilled whenever its process ends: by the nemesis's SIGKILL (a replacement)
or on its own, which `leasecheck.reference.worker` does when it loses its database connection (a
recovery, expected after a cut backend or a server restart). Every process started here
is stopped by `stop()`, which also works on stopped (SIGSTOPped) processes.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import make_conninfo

from chaos.plan import Plan
from leasecheck.reference.demo import Children
from leasecheck.reference.worker import Settings

APP_PREFIX = "leasecheck-soak-"
"""Prefix of every worker's application_name, which is how the nemesis finds its backends."""
RESPAWN_DELAY = 0.2
"""Wait before refilling a slot whose worker died on its own, so a down server is no busy loop."""


@dataclass
class Slot:
    """One worker position: its current process and how it got there."""

    index: int
    generation: int = 0
    proc: subprocess.Popen[bytes] | None = None
    paused_until: float | None = None
    died_at: float | None = None

    @property
    def name(self) -> str:
        return f"w{self.index}.{self.generation}"

    @property
    def application_name(self) -> str:
        return APP_PREFIX + self.name

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Pool:
    """Starts, pauses, kills and refills the workers of one soak."""

    def __init__(self, plan: Plan, dsn: str, mode: str, logs: Path) -> None:
        self.plan = plan
        self.dsn = dsn
        self.mode = mode
        self.logs = logs
        self.children = Children()
        self.slots = [Slot(i) for i in range(plan.workers)]
        self.exits: Counter[str] = Counter()
        """How worker processes ended: 'killed', 'status N' (on their own), 'stopped'."""
        self.job_seconds: list[float] = []

    def start(self) -> None:
        """Start one worker in every slot."""
        for slot in self.slots:
            self._spawn(slot)

    def wait_ready(self, timeout: float) -> None:
        """Wait until every slot's worker has connected and logged that it is ready."""
        deadline = time.monotonic() + timeout
        for slot in self.slots:
            while " ready: " not in self._log(slot):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {slot.name} not ready after {timeout:.0f} s")
                self.refill()
                time.sleep(0.02)

    def pause(self, index: int, seconds: float) -> bool:
        """SIGSTOP the slot's worker until `seconds` from now; False if it has none running."""
        slot = self.slots[index]
        if not slot.alive():
            return False
        assert slot.proc is not None
        slot.proc.send_signal(signal.SIGSTOP)
        until = time.monotonic() + seconds
        slot.paused_until = max(until, slot.paused_until or until)
        return True

    def resume_due(self) -> None:
        """SIGCONT every worker whose pause is over."""
        now = time.monotonic()
        for slot in self.slots:
            if slot.paused_until is not None and slot.paused_until <= now:
                self._resume(slot)

    def heal(self) -> None:
        """SIGCONT every paused worker now."""
        for slot in self.slots:
            self._resume(slot)

    def kill(self, index: int) -> bool:
        """SIGKILL the slot's worker and start a replacement; False if it had none running."""
        slot = self.slots[index]
        if not slot.alive():
            return False
        assert slot.proc is not None
        slot.proc.kill()
        slot.proc.wait()
        self.exits["killed"] += 1
        slot.paused_until = None
        slot.generation += 1
        self._spawn(slot)
        return True

    def refill(self) -> int:
        """Replace every worker that ended on its own (after a short delay); return how many."""
        now = time.monotonic()
        refilled = 0
        for slot in self.slots:
            if slot.proc is None or slot.alive():
                continue
            if slot.died_at is None:
                slot.died_at = now
                self.exits[f"status {slot.proc.returncode}"] += 1
            if now - slot.died_at >= RESPAWN_DELAY:
                slot.paused_until = None
                slot.generation += 1
                self._spawn(slot)
                refilled += 1
        return refilled

    def stop(self, grace: float = 5.0) -> None:
        """SIGCONT and SIGTERM every worker, wait up to `grace` s, then SIGKILL the rest."""
        live = [slot for slot in self.slots if slot.alive()]
        for slot in live:
            self._resume(slot)
            assert slot.proc is not None
            with contextlib.suppress(ProcessLookupError):
                slot.proc.terminate()
        deadline = time.monotonic() + grace
        for slot in live:
            assert slot.proc is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                slot.proc.wait(max(0.0, deadline - time.monotonic()))
            if slot.proc.poll() is not None:
                self.exits["stopped"] += 1
        self.children.reap()

    def log_text(self) -> str:
        """Return every worker log of the soak, one after another."""
        return "".join(
            path.read_bytes().decode(errors="replace") for path in sorted(self.logs.glob("*.log"))
        )

    def _spawn(self, slot: Slot) -> None:
        seconds = self.plan.job_seconds(slot.index, slot.generation)
        self.job_seconds.append(seconds)
        settings = Settings(
            name=slot.name,
            dsn=make_conninfo(self.dsn, application_name=slot.application_name),
            lease=self.plan.timing.lease,
            job_seconds=seconds,
            mode=self.mode,
            poll=self.plan.timing.poll,
        )
        slot.proc = self.children.spawn(settings, self.logs / f"{slot.name}.log")
        slot.died_at = None

    def _resume(self, slot: Slot) -> None:
        if slot.paused_until is not None and slot.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                slot.proc.send_signal(signal.SIGCONT)
        slot.paused_until = None

    def _log(self, slot: Slot) -> str:
        try:
            return (self.logs / f"{slot.name}.log").read_bytes().decode(errors="replace")
        except FileNotFoundError:
            return ""
