"""owner-progress, procrastinate 3.10: the worker that owns a job, heartbeating on time,
has its finish_job refused.

Replays matrix/results/counterexamples/procrastinate-3.10/owner-progress.txt: worker w0
fetches the job and goes silent past the lease; recovery puts it back and w1 fetches
it; w0 wakes and reports the job's outcome first, and w1's own report, well inside its
lease, is refused. Steps and time: see `_story.py` (procrastinate's own JobManager
calls; the silent worker's `last_heartbeat` is rewritten 60 s into the past).

Why a bug, not a design: the refusal is not a revocation of w1 (its heartbeat is fresh
and nobody recovered its job); it is the echo of w0's stale call, which
`procrastinate_finish_job_v1` (sql/schema.sql:279-285) accepted for any job in `todo` or
`doing`, whoever fetched it. The stalled-job recipe
(docs/howto/production/retry_stalled_jobs.md) is for workers "terminated without a
regular shutdown"; w1 is neither stalled nor terminated, and its result is lost.
"""

from __future__ import annotations

import asyncio
import sys

from _story import Story, dsn, finish, say
from procrastinate import jobs


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
        say("w0 wakes: its task ended, its worker records the outcome")
        await s.finish("w0", stale, jobs.Status.SUCCEEDED)
        say("w1's task ends: its worker records the outcome, its lease good")
        if await s.finish("w1", owner, jobs.Status.SUCCEEDED):
            return finish(False, "w1's finish_job was accepted")
        return finish(
            True,
            f"worker w1, which fetched job {job_id} after the documented stalled-job "
            "recipe re-queued it and whose heartbeat was fresh, had its finish_job "
            "refused, because the silent worker w0's late finish_job had been accepted "
            "first",
        )
    finally:
        await s.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
