"""Work items with their leases in a table of their own, and a claim counter.

Written from the README as a queue that keeps "who holds it until when" apart from the
job: `leases` has one row per item (empty until the item is taken), the heartbeat
touches only that row, and a completion or failure report is decided by releasing it
(an UPDATE fenced on the attempt). The claim picks an item and locks it together with
its lease row, takes it, grants the lease and bumps the queue's counter, all in one
transaction. Claims are `leasecheck.Claim`s whose token is the attempt. The
subclasses each plant one bug the issue's short programs reach (see
`bench.corpus.short_programs`).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from leasecheck import Claim
from leasecheck.stateful.contract import Effect
from leasecheck.stateful.sqlfile import load

SQL = {name: query.text for name, query in load(Path(__file__).with_name("leases.sql")).items()}


class WorkLeases:
    """The clean queue: the claim locks the item and its lease row, and counts itself in
    the same transaction; every write to a lease names its attempt."""

    name = "work-leases"
    max_attempts: int | None = 3
    ordered_tokens = True
    pick_sql = "pick"

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(SQL["install"])

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(SQL["reset"])

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        params = {"body": Jsonb(payload), "max_attempts": self.max_attempts}
        row = conn.execute(SQL["enqueue"], params).fetchone()
        assert row is not None, "insert ... returning gives its row"
        return int(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        with conn.transaction():
            claim = self._take(conn, worker, lease)
            if claim is not None:
                conn.execute(SQL["count_claim"])
        return claim

    def _take(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        """Give up exhausted items, pick one, take it and grant its lease (the caller's
        transaction)."""
        conn.execute(SQL["give_up"])
        picked = conn.execute(SQL[self.pick_sql]).fetchone()
        if picked is None:
            return None
        item = int(picked[0])
        taken = conn.execute(SQL["take"], {"id": item}).fetchone()
        assert taken is not None, "the picked item is locked by this transaction"
        attempt = int(taken[0])
        params = {"id": item, "attempt": attempt, "worker": worker, "lease": lease}
        conn.execute(SQL["grant"], params)
        return Claim(job_id=item, token=attempt, worker=worker)

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "lease": lease}
        return conn.execute(SQL["renew"], params).fetchone() is not None

    def _release(self, conn: Connection[Any], claim: Claim) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token}
        return conn.execute(SQL["release"], params).fetchone() is not None

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            if not self._release(conn, claim):
                return False
            conn.execute(SQL["mark_completed"], {"id": claim.job_id})
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        with conn.transaction():
            if not self._release(conn, claim):
                return False
            conn.execute(SQL["mark_failed"], {"id": claim.job_id, "error": error})
            return True

    def effect_key(self, claim: Claim) -> str:
        return f"work-item/{claim.job_id}"

    def state(self, conn: Connection[Any], job_id: int) -> str:
        row = conn.execute(SQL["status"], {"id": job_id}).fetchone()
        assert row is not None, f"item {job_id} was enqueued"
        return str(row[0])


class CountAfterCommit(WorkLeases):
    """Bug: the claim commits its take and grant, then bumps the counter in a statement
    of its own; when that statement fails (a lock timeout behind another claim's open
    transaction) the call raises, and the item it took stays taken by nobody."""

    name = "work-leases-count-after-commit"
    expected = ("no-hidden-claims", "no-lost-jobs")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        with conn.transaction():
            claim = self._take(conn, worker, lease)
        if claim is not None:
            conn.execute(SQL["count_claim"])
        return claim


class UnlockedLeaseRow(WorkLeases):
    """Bug: the claim locks the item row (`for update of w skip locked`) but not its lease
    row, so it grants a lease it read as expired while its owner renews it: the grant
    waits for the renewal, then overwrites it."""

    name = "work-leases-unlocked-lease-row"
    expected = ("exclusive-lease", "fencing", "single-completion")
    pick_sql = "pick_item_only"
