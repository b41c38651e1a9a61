"""Correct queues shaped like users' that an unfaithful harness would accuse (not mutants:
no property may break on them), and one control that really is wrong.

Each is the reference with one call written the way libraries write it: a claim of two
statements in one transaction, calls that check `now()` twice, a notification after the
work has committed, a failure report that logs and swallows its own errors.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease, check_worker
from leasecheck.stateful.contract import BatchEffect, Claim, Effect

GIVE_UP_AT_CAP = """
update jobs
   set status = 'failed', locked_by = null, lease_until = null, finished_at = now(),
       last_error = 'lease expired on the last attempt'
 where id in (select id from jobs
               where status = 'running' and lease_until < now() and attempt >= max_attempts
               for update skip locked)
"""

PICK = """
with next as (
    select id from jobs
     where status = 'queued' or (status = 'running' and lease_until < {clock})
     order by id limit 1 for update skip locked
)
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s, claimed_at = now()
  from next
 where jobs.id = next.id
returning jobs.id, jobs.attempt
"""
"""A CTE, scanned once: the same pick as a subquery in FROM is scanned again for every row
of `jobs` under a nested loop, and takes several (mutant from-subquery-claim)."""


class CapThenPick(ReferenceQueue):
    """Its claim gives up the expired jobs at the cap, then picks a queued or expired job,
    in one transaction: on PostgreSQL both statements see one `now()`, so nothing the
    first left running at the cap is expired for the second."""

    name = "cap-then-pick"
    clock = "now()"

    def __init__(self) -> None:
        super().__init__(max_attempts=1)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        with conn.transaction():
            conn.execute(GIVE_UP_AT_CAP)
            row = conn.execute(PICK.format(clock=self.clock), params).fetchone()
        return None if row is None else Claim(int(row[0]), int(row[1]), worker)


class CapThenPickOnTheClock(CapThenPick):
    """The control: its second statement reads `clock_timestamp()`, which does move inside
    a transaction, so a job left at its cap by the first can expire for the second."""

    name = "cap-then-pick-on-the-clock"
    clock = "clock_timestamp()"


class NowTwice(ReferenceQueue):
    """Every call reads `now()` before and after its work in one transaction, and raises if
    the two differ: PostgreSQL never lets them."""

    name = "now-twice"

    def _same_now(self, conn: Connection[Any], first: Any) -> None:
        row = conn.execute("select now()").fetchone()
        if row is None or row[0] != first:
            raise RuntimeError(f"now() moved inside one transaction: {first} then {row}")

    def _now(self, conn: Connection[Any]) -> Any:
        row = conn.execute("select now()").fetchone()
        assert row is not None
        return row[0]

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        with conn.transaction():
            first = self._now(conn)
            claim = super().claim(conn, worker, lease)
            self._same_now(conn, first)
            return claim

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        with conn.transaction():
            first = self._now(conn)
            ok = super().heartbeat(conn, claim, lease)
            self._same_now(conn, first)
            return ok

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            first = self._now(conn)
            ok = super().complete(conn, claim, effect)
            self._same_now(conn, first)
            return ok

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        with conn.transaction():
            first = self._now(conn)
            ok = super().fail(conn, claim, error)
            self._same_now(conn, first)
            return ok


NOTIFY = "select pg_notify('leasecheck_jobs', %(id)s::text)"


class NotifiesAfter(ReferenceQueue):
    """Its completions and failure reports commit, then notify listeners in one more round
    trip: a call paused there has already given its job back."""

    name = "notifies-after"

    def _notify(self, conn: Connection[Any], claim: Claim) -> None:
        conn.execute(NOTIFY, {"id": claim.job_id})

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        ok = super().complete(conn, claim, effect)
        self._notify(conn, claim)
        return ok

    def complete_many(
        self, conn: Connection[Any], claims: list[Claim], effect: BatchEffect
    ) -> list[bool]:
        accepted = super().complete_many(conn, claims, effect)
        for claim in claims:
            self._notify(conn, claim)
        return accepted

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        ok = super().fail(conn, claim, error)
        self._notify(conn, claim)
        return ok


class SwallowingFail(ReferenceQueue):
    """Its failure report notifies first, then records the failure, and logs and swallows
    any error of that save (answering False), as libraries do with a result save."""

    name = "swallowing-fail"

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        conn.execute(NOTIFY, {"id": claim.job_id})
        try:
            return super().fail(conn, claim, error)
        except psycopg.Error:
            return False  # "logged": the library carries on


class FromStoredEnd(ReferenceQueue):
    """Its heartbeat extends the lease from the stored end (`lease_until + lease`): on
    simulated time, as the end was written with `now()`, but a heartbeat after a long
    stall renews the lease into the past, where another worker takes the job."""

    name = "from-stored-end"

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "lease": check_lease(lease)}
        row = conn.execute(
            "update jobs set lease_until = lease_until + %(lease)s"
            " where id = %(id)s and attempt = %(attempt)s and status = 'running' returning id",
            params,
        ).fetchone()
        return row is not None


class SwallowingComplete(ReferenceQueue):
    """Its completion logs and swallows any error of its save and acknowledges the job
    anyway (answering True), as a library does whose result save fails."""

    name = "swallowing-complete"

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        try:
            return super().complete(conn, claim, effect)
        except psycopg.Error:
            return True  # "logged": acknowledged anyway
