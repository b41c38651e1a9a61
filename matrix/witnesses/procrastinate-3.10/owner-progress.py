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

import sys

from _story import Story, finish, recovered, run, say


async def steps(s: Story) -> int:
    job_id, stale, owner = await recovered(s)
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


if __name__ == "__main__":
    sys.exit(run(steps))
