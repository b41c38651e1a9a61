"""A session: one connection and the one thread that uses it (and, for a queue that
opens its own connections, the queue's client on an endpoint of the stepping proxy).
The pool that lends sessions is `stateful.engine.actors`; a client's life on one,
`stateful.engine.client_sessions`."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.proxy import Endpoint
from leasecheck.stateful.engine.gates import CallGate


@dataclass
class Session:
    """One connection with the one thread that uses it."""

    label: str
    conn: Connection[Any]
    executor: ThreadPoolExecutor
    pending: Future[Any] | None = None
    terminated: bool = False
    invoked: int = 0
    used: bool = False
    """Whether a call was sent on it since the pool handed it out."""
    gate: CallGate | None = None
    """The gate of the call in flight, if that call may be preempted between round trips."""
    endpoint: Endpoint | None = None
    """Its own endpoint of the stepping proxy, when the pool opens sessions through one:
    its calls are then preempted on the wire (`WireGate`)."""
    what: tuple[str, str | None] = ("", None)
    """What the call in flight is and what it concerns, for the story (set by its sender)."""
    times_out: bool = False
    """Whether its call runs with a lock timeout set (the driver's `time_out`): a lock
    wait of it is never held still, `settle` waits until PostgreSQL ends it."""
    thread: int | None = None
    """The thread its call in flight runs on (its executor's, or the machine's)."""
    client: Any = None
    """The queue's own client, when the queue opens its connections (`contract.Clients`):
    its calls get it in place of `conn`, and every connection it opens on `endpoint` is
    this session's. `conn` is then the harness's own, for nothing but the harness."""

    @property
    def target(self) -> Any:
        """What the session's calls run on: the queue's client, or the connection."""
        return self.conn if self.client is None else self.client

    def _clients_sessions(self) -> list[Any]:
        """The proxy's sessions of the queue's client (none for a harness session)."""
        if self.client is None or self.endpoint is None:
            return []
        return self.endpoint.sessions()

    @property
    def pids(self) -> set[int]:
        """Every backend the session's calls may run on: its connection's, and those of
        each connection the queue's client has open."""
        pids = {p for s in self._clients_sessions() if (p := s.backend_pid) is not None}
        return pids if self.conn.closed else pids | {self.pid}

    @property
    def parked(self) -> bool:
        """Whether its call waits at its gate, between two of its statements."""
        return self.gate is not None and self.gate.is_parked

    @property
    def pid(self) -> int:
        return int(self.conn.info.backend_pid)

    @property
    def in_transaction(self) -> bool:
        idle = self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        return not idle or any(s.in_transaction for s in self._clients_sessions())

    @property
    def broken(self) -> bool:
        return self.terminated or self.conn.broken or self.conn.closed
