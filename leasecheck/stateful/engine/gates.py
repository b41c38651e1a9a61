"""Scheduling points inside a call: every round trip a queue sends is a place to stop.

psycopg sends every statement, transaction block, COPY and pipeline sync through one
method, `Connection.wait`, on the thread that runs the call. `GatedConnection`
passes each of those round trips through the session's `Gate` first. A gate armed
with `after=k` lets the call's first k round trips go and then parks the call's
thread before the next one: the call is between two of its statements, holding
whatever its open transaction holds, and nothing more of it reaches the server
until the driver opens the gate. Meanwhile other workers act. A call that ends
before its k-th round trip never parks. This module knows nothing of queues.

A client that does not speak through psycopg (a queue in another language on its
own connections) gets the same points from the stepping proxy (`leasecheck.proxy`),
which holds back a session's next round trip on the wire.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

import psycopg

if TYPE_CHECKING:
    from leasecheck.proxy import Endpoint

PARK_LIMIT = 600.0
"""Seconds a parked call waits for the driver before it gives up (a harness defect)."""


class CallGate(Protocol):
    """Where a call stops between two of its round trips, and how it is let go."""

    @property
    def after(self) -> int: ...

    @property
    def trips(self) -> int:
        """Round trips the call has reached, the one it is parked before included."""
        ...

    @property
    def is_parked(self) -> bool: ...

    def open(self) -> None: ...


class Gate:
    """Counts a call's round trips and parks its thread after the `after`-th."""

    def __init__(self, after: int) -> None:
        if after < 1:
            raise ValueError(f"a call is preempted after at least one round trip, not {after}")
        self.after = after
        self.trips = 0
        self.parked = threading.Event()
        """Set while the call's thread waits at the gate (read by `settle`)."""
        self._open = threading.Event()

    def passing(self) -> None:
        """Called before each round trip, on the call's thread: park once, after `after`."""
        self.trips += 1
        if self.trips != self.after + 1:
            return
        self.parked.set()
        opened = self._open.wait(PARK_LIMIT)
        self.parked.clear()
        if not opened:
            raise TimeoutError(f"a call parked after round trip {self.after} was never resumed")

    def open(self) -> None:
        """Let the parked call go on (or, if it has not reached the gate, never stop it).

        `parked` is cleared here, on the opener's thread, so a `settle` that follows
        at once waits for what the call does next instead of taking it as still parked.
        """
        self.parked.clear()
        self._open.set()

    @property
    def is_parked(self) -> bool:
        return self.parked.is_set()


class GatedConnection(psycopg.Connection[Any]):
    """A psycopg connection whose round trips pass the gate of the call in flight."""

    gate: Gate | None = None

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        gate = self.gate
        if gate is not None:
            gate.passing()
        return super().wait(gen, *args, **kwargs)


class WireGate:
    """A call's gate on the wire: its session's endpoint of the stepping proxy lets the
    call's first `after` round trips go by and holds the next, the same point `Gate`
    parks at, for a client whose round trips psycopg does not see (`leasecheck.proxy`).
    The call's thread is not parked: it waits for an answer the proxy holds back."""

    def __init__(self, endpoint: Endpoint, after: int) -> None:
        if after < 1:
            raise ValueError(f"a call is preempted after at least one round trip, not {after}")
        self.after = after
        self.endpoint = endpoint
        self._before = self._passed()
        endpoint.let_pass(after)
        endpoint.stepped = True

    def _passed(self) -> int:
        return sum(s.units_passed for s in self.endpoint.all_sessions())

    @property
    def trips(self) -> int:
        return self._passed() - self._before + (1 if self.is_parked else 0)

    @property
    def is_parked(self) -> bool:
        return any(s.state == "held" for s in self.endpoint.sessions())

    def open(self) -> None:
        """Let the held round trip go, and every one after it."""
        self.endpoint.stepped = False
