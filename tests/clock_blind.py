"""Queues that do not follow simulated time, for the clock probe's tests (not mutants:
no property should judge them; the run must stop before exploring)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease, check_worker
from leasecheck.stateful.contract import Claim

WALL_CLOCK_CLAIM = """
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = %(worker)s,
       lease_until = current_timestamp + %(lease)s, claimed_at = current_timestamp
  from (select id from jobs
         where status = 'queued'
            or (status = 'running' and lease_until < current_timestamp
                and attempt < max_attempts)
         order by id limit 1 for update skip locked) as next
 where jobs.id = next.id
returning jobs.id, jobs.attempt
"""

PINNED_FUNCTION = """
create function claim_job(worker text, lease interval) returns table (id bigint, attempt int)
language sql set search_path = pg_catalog, public as $$
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = worker,
       lease_until = now() + lease, claimed_at = now()
  from (select j.id from jobs j
         where j.status = 'queued'
            or (j.status = 'running' and j.lease_until < now() and j.attempt < j.max_attempts)
         order by j.id limit 1 for update skip locked) as next
 where jobs.id = next.id
returning jobs.id, jobs.attempt
$$
"""


class WallClock(ReferenceQueue):
    """The reference with its claim written with CURRENT_TIMESTAMP."""

    name = "wall-clock"

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        row = conn.execute(WALL_CLOCK_CLAIM, params).fetchone()
        return None if row is None else Claim(int(row[0]), int(row[1]), worker)


class PinnedSearchPath(ReferenceQueue):
    """The reference with its claim in a function hardened with a pinned search_path."""

    name = "pinned-search-path"

    def install(self, conn: Connection[Any]) -> None:
        super().install(conn)
        conn.execute(PINNED_FUNCTION)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        row = conn.execute("select * from claim_job(%(worker)s, %(lease)s)", params).fetchone()
        return None if row is None else Claim(int(row[0]), int(row[1]), worker)


WALL_CLOCK_HEARTBEAT = """
update jobs
   set lease_until = current_timestamp + %(lease)s
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id
"""


class WallClockHeartbeat(ReferenceQueue):
    """The reference with its heartbeat written with CURRENT_TIMESTAMP: its claim is fine."""

    name = "wall-clock-heartbeat"

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "lease": check_lease(lease)}
        return conn.execute(WALL_CLOCK_HEARTBEAT, params).fetchone() is not None
