"""What the machine believes about each simulated worker (plain Python, no SQL)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leasecheck.stateful.contract import Claim
from leasecheck.stateful.engine.actors import Session
from leasecheck.stateful.verdict.grants import Grant


@dataclass(eq=False)
class Held:
    """A claim a worker holds; `grant` is set once the claim has committed.

    `claim` is the harness's reading of it; `raw` is the object the queue handed
    out, which is what the queue gets back.
    """

    claim: Claim
    label: str
    raw: Any = None

    def __post_init__(self) -> None:
        if self.raw is None:
            self.raw = self.claim

    grant: Grant | None = None
    believed: bool = True
    next_beat: int | None = None
    completion_sent: bool = False
    """Whether its worker sent its completion (in flight, or answered): a heartbeat of it
    then races or follows its own worker's completion. A rollback of the transaction the
    completion ran in voids it, and clears this."""


@dataclass(eq=False)
class Worker:
    """One simulated worker process: a main connection and a heartbeat connection."""

    name: str
    main: Session
    beat: Session | None
    held: list[Held] = field(default_factory=list)
    paused: bool = False
    crashed: bool = False
    txn: list[Callable[[], None]] | None = None
    began: int = 0
    """When its held transaction began: what `now()` reads in every call inside it."""
    txn_calls: list[int] = field(default_factory=list)
    undo: list[Callable[[], None]] = field(default_factory=list)
    """What runs if its held transaction rolls back (`txn` holds what runs if it commits)."""
    snapshot: list[Held] = field(default_factory=list)
    waiting: Callable[[Any], None] | None = None
    beat_waiting: Callable[[Any], None] | None = None
    level: str = ""
    """The isolation level its held transaction was opened at, if one was named."""
    known_as: str = ""
    """The name the queue is told, when it is not `name`: a worker restarted under its
    old name (`restart`) is told the old one, while the story tells the two apart."""

    @property
    def queue_name(self) -> str:
        """Return the worker name the queue's calls get."""
        return self.known_as or self.name

    @property
    def can_act(self) -> bool:
        """Return whether the worker can take a step now (not paused, not blocked)."""
        return not self.paused and not self.crashed and self.waiting is None

    @property
    def granted(self) -> list[Held]:
        return [h for h in self.held if h.grant is not None]
