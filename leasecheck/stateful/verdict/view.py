"""What the property families read of the judge's beliefs, as protocols.

The Oracle keeps the jobs and dispatches to the families (ownership's refusals and
stale calls, retry-cap, no-lost-jobs, done-effect, no-hidden-claims); each family reads
only what it needs, named here, so it imports no Oracle and the Oracle's module
imports the families without a circle.
A family can be fed any record with these members (a test's literal history too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from leasecheck.stateful.contract import JobId
from leasecheck.stateful.verdict.grants import JobModel
from leasecheck.stateful.verdict.inflight import InFlight
from leasecheck.stateful.verdict.ledger import Ledger
from leasecheck.stateful.verdict.receiver import Effects


class Promises(Protocol):
    """What a queue promised of its caps, and what the judge was told of failures."""

    @property
    def max_attempts(self) -> int | None: ...

    @property
    def max_failures(self) -> int | None: ...

    @property
    def failed_told(self) -> int:
        """Failure reports accepted so far."""
        ...

    @property
    def in_flight(self) -> InFlight: ...

    @property
    def ledger(self) -> Ledger: ...


class Jobs(Promises, Protocol):
    """The jobs, and what the queue shows and answered of them."""

    @property
    def jobs(self) -> dict[JobId, JobModel]: ...

    @property
    def observe(self) -> Callable[[JobId], str] | None:
        """The queue's `state()`, where it has one."""
        ...

    @property
    def shown(self) -> dict[JobId, str]:
        """What `state()` showed of each job at the drain."""
        ...

    @property
    def effects(self) -> Effects: ...

    @property
    def answers_complete(self) -> bool: ...


class Owners(Jobs, Protocol):
    """What the ownership rules read besides the jobs: the lease, what the queue
    declares of its tokens and of expired leases, and the completions told."""

    @property
    def lease(self) -> int: ...

    @property
    def ordered_tokens(self) -> bool: ...

    @property
    def revokes_expired(self) -> bool: ...

    @property
    def done_told(self) -> int:
        """Accepted completions told so far."""
        ...


__all__ = ["Jobs", "Owners", "Promises"]
