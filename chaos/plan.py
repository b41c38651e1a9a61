"""The seeded part of a soak: what the nemesis does when, and how long each worker's jobs take.

Everything here is a pure function of the seed and the soak's settings, so a seed names
one schedule of faults and one set of job durations. What the workers happen to be doing
when a fault lands is up to the operating system and is not part of the plan.

`leasecheck.reference.worker` takes one `--job-seconds` per process, so a job's duration belongs to
the worker process that runs it: every worker process (slot, generation) draws its own.
One slot, picked by the seed, holds a slow worker in every generation (its jobs outlast
the lease, so only a heartbeat keeps them); the others' jobs take 10-100 ms.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

KINDS = ("pause", "kill", "cut", "restart")
"""Every fault the nemesis injects; `restart` restarts the server, the others hit one worker."""

_WEIGHTS = {"pause": 4, "kill": 2, "cut": 2}
"""Relative frequency of the per-worker faults after the first round (restart happens once)."""


@dataclass(frozen=True)
class Timing:
    """The real durations of a soak, in seconds."""

    lease: float = 1.0
    job_min: float = 0.01
    job_max: float = 0.1
    slow_min: float = 1.2
    """Shortest slow job, in leases."""
    slow_max: float = 1.6
    """Longest slow job, in leases."""
    gap: float = 1.0
    """Mean time between two faults (exponentially distributed)."""
    pause_min: float = 0.2
    """Shortest pause, in leases."""
    pause_max: float = 2.5
    """Longest pause, in leases; the first pause is always at least 1.5 leases."""
    poll: float = 0.05


@dataclass(frozen=True)
class Fault:
    """One thing the nemesis does: at `at` seconds into the chaos, to worker slot `slot`."""

    at: float
    kind: str
    slot: int
    seconds: float = 0.0
    """How long a pause lasts; 0 for the other kinds."""


@dataclass(frozen=True)
class Plan:
    """The faults of a soak in time order, and the seed its job durations come from."""

    seed: int
    workers: int
    timing: Timing
    faults: tuple[Fault, ...]
    slow_slot: int

    def job_seconds(self, slot: int, generation: int) -> float:
        """Return how long every job of worker process (slot, generation) takes."""
        rng = random.Random(f"{self.seed}/{slot}/{generation}")
        t = self.timing
        if slot == self.slow_slot:
            return round(t.lease * rng.uniform(t.slow_min, t.slow_max), 3)
        return round(rng.uniform(t.job_min, t.job_max), 3)


def make(seed: int, workers: int, timing: Timing, seconds: float, restart: bool) -> Plan:
    """Return the plan for `seconds` of chaos on `workers` workers.

    The first round is every kind once, so that even a short soak injects each: a pause
    longer than the lease first, while every worker is up to reclaim the paused one's job
    (that is what makes naive workers duplicate), then a kill and a cut in an order the
    seed picks, then the server restart, which ends every worker's connection. After it
    the worker faults come at random. The server is restarted exactly once, and
    only if `restart`: a server the soak did not start is not its to restart.
    """
    if workers < 1:
        raise ValueError(f"need at least 1 worker, got {workers}")
    rng = random.Random(seed)
    slow_slot = rng.randrange(workers) if workers > 1 else -1
    others = ["kill", "cut"]
    rng.shuffle(others)
    first = ["pause", *others, *(["restart"] if restart else [])]
    kinds = list(_WEIGHTS)
    weights = [_WEIGHTS[k] for k in kinds]
    faults: list[Fault] = []
    at = 0.0
    paused_once = False
    while True:
        at += rng.expovariate(1 / timing.gap)
        if at > seconds and len(faults) >= len(first):
            break
        kind = first[len(faults)] if len(faults) < len(first) else rng.choices(kinds, weights)[0]
        slot = rng.randrange(workers)
        pause = 0.0
        if kind == "pause":
            low = timing.pause_min if paused_once else 1.5
            pause = round(timing.lease * rng.uniform(low, max(low, timing.pause_max)), 3)
            paused_once = True
        faults.append(Fault(at=round(at, 3), kind=kind, slot=slot, seconds=pause))
    return Plan(
        seed=seed, workers=workers, timing=timing, faults=tuple(faults), slow_slot=slow_slot
    )
