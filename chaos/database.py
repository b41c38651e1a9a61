"""The soak's own SQL: set up its database, watch the queue, cut backends, count the outcome.

The workers' SQL stays in `reference.queue`; this module only adds an audit trigger
(every committed completion, whoever asked, so a duplicate completion shows even where
the receipts' idempotency key hides it) and reads. Its connection reconnects after the
nemesis cuts it or restarts the server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("soak.sql"))


@dataclass(frozen=True)
class Outcome:
    """What the database says happened to the jobs."""

    by_status: dict[str, int]
    max_attempt: int
    duplicate_completions: int
    extra_completions: int
    duplicate_receipts: int
    extra_receipts: int
    done_without_receipt: int


class Database:
    """One autocommit connection to the soak's database that survives cuts and restarts."""

    def __init__(self, dsn: str, retry_seconds: float = 60.0) -> None:
        self.dsn = dsn
        self.retry_seconds = retry_seconds
        self._conn: psycopg.Connection[Any] | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def install(self, queue: ReferenceQueue) -> None:
        """Create the reference schema and the completion audit."""
        conn = self._connect()
        queue.install(conn)
        conn.execute(QUERIES["install_audit"].text)

    def enqueue(self, queue: ReferenceQueue, count: int) -> list[int]:
        """Enqueue `count` jobs in one transaction; return their ids."""
        conn = self._connect()
        with conn.transaction():
            return [queue.enqueue(conn, {"soak_job": n}) for n in range(count)]

    def pending(self) -> int:
        """Return how many jobs are queued or running."""
        return int(self._one("pending", {})[0])

    def cut(self, application_name: str) -> int:
        """Terminate the backends of one worker process; return how many ended."""
        return int(self._one("cut_worker", {"application_name": application_name})[0])

    def duplicates_from(self, worker_prefix: str) -> int:
        """Return how many jobs with duplicate receipts had one from workers named so."""
        return int(self._one("duplicate_receipts_from", {"prefix": worker_prefix})[0])

    def outcome(self) -> Outcome:
        """Count what happened to the jobs."""
        rows = self._all("tally", {})
        completions = self._one("duplicate_completions", {})
        receipts = self._one("duplicate_receipts", {})
        return Outcome(
            by_status={str(r[0]): int(r[1]) for r in rows},
            max_attempt=max((int(r[2]) for r in rows), default=0),
            duplicate_completions=int(completions[0]),
            extra_completions=int(completions[1]),
            duplicate_receipts=int(receipts[0]),
            extra_receipts=int(receipts[1]),
            done_without_receipt=int(self._one("done_without_receipt", {})[0]),
        )

    def _one(self, name: str, params: dict[str, Any]) -> tuple[Any, ...]:
        rows = self._all(name, params)
        assert rows, f"query {name} returned no row"
        return rows[0]

    def _all(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        deadline = time.monotonic() + self.retry_seconds
        while True:
            try:
                return self._connect().execute(QUERIES[name].text, params).fetchall()
            except psycopg.OperationalError:
                self.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
        return self._conn
