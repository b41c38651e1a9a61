"""reaper-by-id — a reaper finds expired jobs, then resets them by id alone.

Source: River issue #1302 (a rescuer that selected stuck jobs and then updated them
by id, racing a completion that committed in between). The owner's late completion
commits while the reaper waits on its row lock; the reaper then puts the finished job
back in the queue, and it runs again.
The reaper is the queue's own recovery sweep (`maintain`), run by the machine as an
actor of its own, as River runs its rescuer. Putting an expired job back is its
design (`revokes_expired`), so a late owner it refuses is not the bug; the race is.
It needs a transaction held open while the reaper waits on the row: a completion
that commits meanwhile is undone (a finished job handed out again: no-lost-jobs,
single-completion), a fresh claim that commits meanwhile is reset under its owner
(exclusive-lease, owner-progress). `test_the_reaper_race_is_reachable` drives the
machine's own rules along the completion case, so the race has a test.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from mutants._base import sql


class ReaperById(ReferenceQueue):
    name = "reaper-by-id"
    revokes_expired = True
    expected = (
        "exclusive-lease",
        "owner-progress",
        "no-lost-jobs",
        "single-completion",
        "fencing",
        "retry-cap",
    )

    def maintain(self, conn: Connection[Any]) -> None:
        ids = [row[0] for row in conn.execute(sql("reaper_expired")).fetchall()]
        if ids:
            conn.execute(sql("reaper_reset_by_id"), {"ids": ids})
