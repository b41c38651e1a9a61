"""reaper-by-id — a reaper finds expired jobs, then resets them by id alone.

Source: River issue #1302 (a rescuer that selected stuck jobs and then updated them
by id, racing a completion that committed in between). The owner's late completion
commits while the reaper waits on its row lock; the reaper then puts the finished job
back in the queue, and it runs again.
Caught by: owner-progress, first: even without the race, giving an expired job back
refuses its late owner although nobody replaced it. The race itself needs a
transaction held open while the reaper waits on the row: a completion that commits
meanwhile is undone (a finished job handed out again: no-lost-jobs, single-completion),
a fresh claim that commits meanwhile is reset under its owner (exclusive-lease).
Random search kills the mutant in a median of 39 examples, but on the race itself in only
2 of 20 seeds (18 die first on owner-progress); `test_the_reaper_race_is_reachable`
drives the machine's own rules along the completion case, so the race has a test.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import sql


class ReaperById(ReferenceQueue):
    name = "reaper-by-id"
    expected = ("owner-progress", "exclusive-lease", "no-lost-jobs", "single-completion", "fencing")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        ids = [row[0] for row in conn.execute(sql("reaper_expired")).fetchall()]
        if ids:
            conn.execute(sql("reaper_reset_by_id"), {"ids": ids})
        return super().claim(conn, worker, lease)
