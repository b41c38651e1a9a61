"""The reference queue: every line of SQL the reference system runs goes through here.

It implements the contract of `stateful.contract`: the attempt counter is the fencing
token, a completion commits its effect in the same transaction as the ownership
check, and the idempotency key comes from the job id, never the attempt.
The worker loop (`leasecheck.reference.worker`) and the demo call this module; they hold no SQL.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.types.json import Jsonb

from leasecheck import tables
from leasecheck.stateful.contract import BatchEffect, Claim, Effect
from leasecheck.stateful.sqlfile import load

HERE = Path(__file__).parent
QUERIES = load(HERE / "queries.sql")
MAX_WORKER_NAME = 200


class BadInput(ValueError):
    """A caller passed something the queue cannot take; the message says how to fix it."""


def _sql(name: str) -> str:
    return QUERIES[name].text


MAX_PAYLOAD_BYTES = 1_000_000
"""A job carries what its worker needs to find the work, not the work: 1 MB of JSON at most."""


def check_worker(worker: str) -> str:
    """Return `worker` if it is a usable name, else raise BadInput."""
    if not worker or not worker.strip():
        raise BadInput("worker name is empty: give each worker a short non-blank name")
    if len(worker) > MAX_WORKER_NAME:
        raise BadInput(
            f"worker name is {len(worker)} characters long: keep it at most {MAX_WORKER_NAME}"
        )
    return worker


def check_lease(lease: timedelta) -> timedelta:
    """Return `lease` if it is positive, else raise BadInput."""
    if lease <= timedelta(0):
        raise BadInput(f"lease must be positive, got {lease}: pass e.g. timedelta(seconds=30)")
    return lease


class ReferenceQueue:
    """The queue of the story with all four fixes: heartbeat, fencing, idempotency key, cap."""

    name = "reference"
    ordered_tokens = True
    heartbeats = True

    def __init__(self, max_attempts: int = 3) -> None:
        if max_attempts < 1:
            raise BadInput(f"max_attempts must be at least 1, got {max_attempts}")
        self.max_attempts: int | None = max_attempts

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute((HERE / "schema.sql").read_text())

    def reset(self, conn: Connection[Any]) -> None:
        tables.empty(conn, "receipts", "jobs")

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        text = json.dumps(payload)
        size = len(text.encode())
        if size > MAX_PAYLOAD_BYTES:
            raise BadInput(
                f"payload is {size} bytes of JSON: keep it at most {MAX_PAYLOAD_BYTES}; "
                "store big data elsewhere and enqueue a reference to it"
            )
        payload_json = Jsonb(payload, dumps=lambda _: text)
        params = {"payload": payload_json, "max_attempts": self.max_attempts}
        try:
            row = conn.execute(_sql("enqueue"), params).fetchone()
        except psycopg.errors.UntranslatableCharacter:
            raise BadInput(
                "payload holds a \\u0000 character, which jsonb cannot store: "
                "strip or escape NUL characters before enqueueing"
            ) from None
        except psycopg.errors.ProgramLimitExceeded as exc:
            raise BadInput(
                f"payload too large for jsonb ({exc}); store big data elsewhere"
            ) from None
        assert row is not None
        return int(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        row = conn.execute(_sql("claim"), params).fetchone()
        return None if row is None else Claim(job_id=int(row[0]), token=int(row[1]), worker=worker)

    def claim_many(
        self, conn: Connection[Any], worker: str, lease: timedelta, n: int
    ) -> list[Claim]:
        if n < 1:
            raise BadInput(f"a batch claims at least 1 job, asked for {n}")
        params = {"worker": check_worker(worker), "lease": check_lease(lease), "n": n}
        rows = conn.execute(_sql("claim_many"), params).fetchall()
        return [Claim(job_id=int(r[0]), token=int(r[1]), worker=worker) for r in sorted(rows)]

    def complete_many(
        self, conn: Connection[Any], claims: list[Claim], effect: BatchEffect
    ) -> list[bool]:
        params = {"ids": [c.job_id for c in claims], "attempts": [c.token for c in claims]}
        with conn.transaction():
            done = {(row[0], row[1]) for row in conn.execute(_sql("complete_many"), params)}
            accepted = [(c.job_id, c.token) in done for c in claims]
            for claim, ok in zip(claims, accepted, strict=True):
                if ok:
                    effect(conn, claim)
            return accepted

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "lease": check_lease(lease)}
        return conn.execute(_sql("heartbeat"), params).fetchone() is not None

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            row = conn.execute(_sql("complete"), {"id": claim.job_id, "attempt": claim.token})
            if row.fetchone() is None:
                return False
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "error": error}
        return conn.execute(_sql("fail"), params).fetchone() is not None

    def effect_key(self, claim: Claim) -> str:
        return f"job-{claim.job_id}"

    def state(self, conn: Connection[Any], job_id: int) -> str:
        row = conn.execute(_sql("state"), {"id": job_id}).fetchone()
        if row is None:
            raise BadInput(f"no job {job_id}: pass an id that enqueue returned")
        return str(row[0])

    # The story's worker modes need a little more than the contract.

    def complete_unfenced(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        """Mark the job done whoever asks: the bug of the naive and heartbeat workers."""
        with conn.transaction():
            conn.execute(_sql("complete_unfenced"), {"id": claim.job_id})
            effect(conn)
            return True

    def send_receipt(self, conn: Connection[Any], claim: Claim, key: str | None) -> None:
        """Record a receipt for the claim's job; a repeated `key` is dropped."""
        params = {"id": claim.job_id, "worker": claim.worker, "attempt": claim.token, "key": key}
        conn.execute(_sql("send_receipt"), params)

    def receipts(self, conn: Connection[Any], job_id: int) -> int:
        """Return how many receipts the job produced."""
        row = conn.execute(_sql("receipts_for"), {"id": job_id}).fetchone()
        return int(row[0]) if row else 0

    def job(self, conn: Connection[Any], job_id: int) -> dict[str, Any] | None:
        """Return one job's row as a dict, or None."""
        cur = conn.execute(_sql("job"), {"id": job_id})
        row = cur.fetchone()
        if row is None:
            return None
        assert cur.description is not None
        return {col.name: value for col, value in zip(cur.description, row, strict=True)}


Queue = ReferenceQueue
