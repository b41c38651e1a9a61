"""owner-progress, procrastinate 3.10: the worker that owns a job, heartbeating on time,
has its own report refused, because a stale worker's report was taken first.

The shape the machine judges as owner-progress (the refused owner's job not completed
by anyone; a refusal after a stale completion is fencing's echo): worker w0 fetches the
job and goes silent past the lease; the documented stalled-job recipe puts it back and
w1 fetches it; w0 wakes and reports its run failed (retry_job: accepted, the job goes
back to `todo`); w1's task then fails too, well inside its lease, and w1's retry_job is
refused. Steps and time: see `_story.py` (procrastinate's own JobManager calls; the
silent worker's `last_heartbeat` is rewritten 60 s into the past).

Why a bug, not a design: the refusal is not a recovery of w1's job (w1's heartbeat is
fresh; get_stalled_jobs does not list it); it is the echo of w0's stale call, which
`procrastinate_retry_job_v2` (sql/schema.sql:376-389) applied to a job in `doing`,
whoever fetched it. The stalled-job recipe (docs/howto/production/retry_stalled_jobs.md)
is for workers "terminated without a regular shutdown"; w1 is neither stalled nor
terminated, and its report is refused.
"""

from __future__ import annotations

import asyncio
import sys

from _story import Story, dsn, finish, say


async def main() -> int:
    s = Story(dsn())
    await s.open()
    try:
        job_id = await s.defer()
        await s.start("w0")
        await s.start("w1")
        stale = await s.fetch("w0")
        if stale is None or stale.id != job_id:
            return finish(False, "w0 did not fetch the job")
        s.stand_still("w0", 60)
        await s.beat("w1")
        if job_id not in await s.recipe():
            return finish(False, "the recipe did not find w0's job stalled")
        owner = await s.fetch("w1")
        if owner is None or owner.id != job_id:
            return finish(False, "w1 did not fetch the recovered job")
        await s.beat("w1")
        say("w0 wakes: its task raised, its worker asks for a retry")
        await s.retry("w0", stale)
        await s.beat("w1")
        listed = [j.id for j in await s.jm.get_stalled_jobs()]
        say(f"get_stalled_jobs() -> {listed} (w1's heartbeat is fresh)")
        say("w1's task raises too: its worker asks for a retry, its lease good")
        if await s.retry("w1", owner):
            return finish(False, "w1's retry_job was accepted")
        return finish(
            True,
            f"worker w1, which fetched job {job_id} after the documented stalled-job "
            "recipe re-queued it and whose heartbeat was fresh, had its retry_job "
            "refused, because the silent worker w0's late retry_job had been accepted "
            "first and put the job back to todo",
        )
    finally:
        await s.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
