"""fencing, procrastinate 3.10: a stale worker's late finish_job is accepted for a job
another worker holds.

Replays matrix/results/counterexamples/procrastinate-3.10/fencing.txt: worker w0 fetches
job1 and goes silent past the 30 s lease; recovery puts the job back and w1 fetches it;
w0 wakes and completes job1: accepted, while w1 owns it. Steps and time: see
`_story.py` (procrastinate's own JobManager calls; the silent worker's
`last_heartbeat` is rewritten 60 s into the past).

Why a bug, not a design: procrastinate hands out no token, and
`procrastinate_finish_job_v1` (sql/schema.sql:279-285) updates the job `WHERE id = job_id
AND status IN ('todo', 'doing')`, whoever fetched it, so the finish of the execution the
documented stalled-job recipe took the job from lands on the new execution. The recipe
is meant for workers "terminated without a regular shutdown"
(docs/howto/production/retry_stalled_jobs.md), and the how-to deprecates the age-based
`nb_seconds` because it "may lead to wrongly retrying jobs that are still running":
procrastinate does not mean to run one job twice at once, yet nothing refuses the old
execution's result.
"""

from __future__ import annotations

import sys

from _story import Story, finish, recovered, run, say
from procrastinate import jobs


async def steps(s: Story) -> int:
    job_id, stale, owner = await recovered(s)
    say("w0 wakes: its task ended, its worker records the outcome")
    late = await s.finish("w0", stale, jobs.Status.SUCCEEDED)
    if not late:
        return finish(False, "w0's late finish_job was refused")
    await s.finish("w1", owner, jobs.Status.SUCCEEDED)
    return finish(
        True,
        "after the documented stalled-job recipe re-queued job "
        f"{job_id} and worker w1 fetched it, the silent worker w0's late "
        "finish_job(succeeded) was accepted and marked the job succeeded while w1 "
        "was running it: finish_job matches by id and status only",
    )


if __name__ == "__main__":
    sys.exit(run(steps))
