"""Queues that open their own connections (`contract.Clients`), as libraries do.

`OwnClientQueue` is the reference queue run by a client of its own: each simulated
worker's client opens its connection on the DSN the harness hands it, reconnects when
it broke (as a pool refills), and runs the reference's SQL there. `TwoStepClaim` is
that queue with a race inside one call: its claim reads a candidate in one statement
and marks it in the next, so a second worker's whole claim can land between the two
round trips, which only a pause on the wire between them shows.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import BatchEffect, Claim, Effect, HarnessFault
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("own_clients.sql"))


class Client:
    """One worker's connection, opened by the library on the worker's DSN."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.closed = False
        self.conn = psycopg.connect(dsn, autocommit=True)

    def connection(self) -> Connection[Any]:
        """The open connection, or a new one if it broke (the harness cut it)."""
        if self.conn.closed or self.conn.broken:
            self.conn = psycopg.connect(self.dsn, autocommit=True)
        return self.conn


def _outside(conn: Connection[Any]) -> None:
    """The effect inside a completion of a queue whose effects run outside it: none (the
    machine runs the task's effect as its body)."""


class OwnClientQueue(ReferenceQueue):
    """The reference's SQL on connections the queue opens itself."""

    name = "own-client"
    held_transactions = False
    transactional_effects = False

    def connect(self, name: str, dsn: str) -> Client:
        return Client(dsn)

    def disconnect(self, client: Client) -> None:
        client.conn.close()

    def claim(self, client: Any, worker: str, lease: timedelta) -> Claim | None:
        return super().claim(client.connection(), worker, lease)

    def claim_many(self, client: Any, worker: str, lease: timedelta, n: int) -> list[Claim]:
        return super().claim_many(client.connection(), worker, lease, n)

    def complete_many(self, client: Any, claims: list[Claim], effect: BatchEffect) -> list[bool]:
        return super().complete_many(client.connection(), claims, lambda conn, claim: None)

    def heartbeat(self, client: Any, claim: Claim, lease: timedelta) -> bool:
        return super().heartbeat(client.connection(), claim, lease)

    def complete(self, client: Any, claim: Claim, effect: Effect) -> bool:
        return super().complete(client.connection(), claim, _outside)

    def fail(self, client: Any, claim: Claim, error: str) -> bool:
        return super().fail(client.connection(), claim, error)


class Stubborn(OwnClientQueue):
    """Retries its completion on a broken connection, as dramatiq-postgres's `retry_pg`
    does (for minutes): until its client is closed, or, `deaf`, for ever."""

    name = "stubborn"

    def __init__(self, deaf: bool = False) -> None:
        super().__init__()
        self.deaf = deaf

    def disconnect(self, client: Client) -> None:
        client.closed = True
        client.conn.close()

    def complete(self, client: Any, claim: Claim, effect: Effect) -> bool:
        while self.deaf or not getattr(client, "closed", False):
            try:
                return super().complete(client, claim, effect)
            except psycopg.OperationalError:
                threading.Event().wait(0.01)  # the library's back-off
        raise RuntimeError("the client was closed")


class Orphaned(OwnClientQueue):
    """A queue whose client's carrier dies at the completion (a host process exiting, as
    a Node.js host can): the adapter says so with `HarnessFault`, never an answer."""

    name = "orphaned"

    def complete(self, client: Any, claim: Claim, effect: Effect) -> bool:
        raise HarnessFault("the host process exited: killed")


class TwoStepClaim(OwnClientQueue):
    """Reads the job it will claim, then marks it, in two statements with no lock."""

    name = "two-step-claim"

    def claim(self, client: Any, worker: str, lease: timedelta) -> Claim | None:
        conn = client.connection()
        row = conn.execute(QUERIES["candidate"].text).fetchone()
        if row is None:
            return None
        params = {"id": row[0], "worker": worker, "lease": lease}
        taken = conn.execute(QUERIES["take"].text, params).fetchone()
        if taken is None:
            return None
        return Claim(job_id=int(taken[0]), token=int(taken[1]), worker=worker)
