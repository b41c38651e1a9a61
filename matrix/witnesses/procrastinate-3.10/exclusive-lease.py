"""exclusive-lease, procrastinate 3.10: a job is fetched by a second worker while the
worker that owns it runs it, heartbeating on time.

Replays matrix/results/counterexamples/procrastinate-3.10/exclusive-lease.txt: worker w0
fetches the job and goes silent past the lease; recovery puts it back and w1 fetches
it; w0 wakes and reports its (failed) run, retry_job puts the job back to `todo` under
w1's feet, and another worker fetches it while w1 still runs it. Steps and time: see
`_story.py` (procrastinate's own JobManager calls; the silent worker's
`last_heartbeat` is rewritten 60 s into the past).

Why a bug, not a design: `procrastinate_retry_job_v2` (sql/schema.sql:376-389) moves any
`doing` job back to `todo` by id, whoever fetched it, so the stale execution's retry
re-queues a job that a live worker with a fresh heartbeat holds. The how-to
(docs/howto/production/retry_stalled_jobs.md) deprecates the age-based `nb_seconds`
because it "may lead to wrongly retrying jobs that are still running": running one job
twice at once is what procrastinate means to avoid.
"""

from __future__ import annotations

import sys

from _story import Story, finish, recovered, run, say


async def steps(s: Story) -> int:
    job_id, stale, _ = await recovered(s, ("w2",))
    say("w0 wakes: its task raised, its worker asks for a retry")
    if not await s.retry("w0", stale):
        return finish(False, "w0's late retry_job was refused")
    await s.beat("w1")
    second = await s.fetch("w2")
    if second is None or second.id != job_id:
        return finish(False, "w2 did not fetch the job w1 holds")
    return finish(
        True,
        f"while worker w1 ran job {job_id} with a fresh heartbeat, the silent "
        "worker w0's late retry_job put it back to todo and worker w2 fetched it: "
        "two live workers ran the job at once",
    )


if __name__ == "__main__":
    sys.exit(run(steps))
