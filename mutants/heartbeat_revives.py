"""heartbeat-revives — a heartbeat fenced on the attempt, not the status, writes `running`.

Source: a heartbeat thread that "makes sure the job is still marked running" while the
worker's own thread completes it. Fenced on the attempt, it only ever touches its own
job; but a beat sent while the completion's transaction holds the row waits for it,
and then lands on the finished job: the heartbeat is accepted and the job runs again.
It needs a heartbeat in flight while its own worker completes (blocked behind a held
transaction, or behind a completion paused between its statements).
Caught by: fencing (the heartbeat of a completed claim accepted), or no-lost-jobs
(the finished job handed out again). `tests/test_preemption.py` replays the race as a
five-move program: a completion paused after its UPDATE, time passes, it goes on.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue, check_lease
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class HeartbeatRevives(ReferenceQueue):
    name = "heartbeat-revives"
    expected = ("fencing", "no-lost-jobs", "single-completion", "exclusive-lease")

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "lease": check_lease(lease)}
        params["worker"] = claim.worker
        return conn.execute(sql("heartbeat_reviving"), params).fetchone() is not None
