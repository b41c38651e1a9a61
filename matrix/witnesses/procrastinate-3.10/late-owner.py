"""late-owner, procrastinate 3.10: a worker that stood still while another worker started
is pruned, and its heartbeats land nowhere once it runs again, though nobody took its job.

Replays matrix/results/counterexamples/procrastinate-3.10/late-owner.txt: worker w0 holds
job1 and stands still past the 30 s lease; worker w1 starts (it prunes stalled
workers, as `Worker.run` does); w0 wakes and heartbeats: refused (procrastinate keeps no
row for it any more), while job1, which nobody else was granted, still shows `doing`.
Steps and time: see `_story.py` (procrastinate's own JobManager calls; the silent
worker's `last_heartbeat` is rewritten 31 s into the past).

Why a bug, not a design: `procrastinate_prune_stalled_workers_v1` (sql/schema.sql:553-561)
deletes the worker's row and `worker_id` on its jobs is set NULL (schema.sql:77, `ON
DELETE SET NULL`); `procrastinate_update_heartbeat_v1` then updates no row and the
worker is never told (worker.py:481-490 ignores the result). Its running job stays
"stalled" for good (queries.sql:39-53 takes `worker_id IS NULL` as stalled), however
often the worker beats, so the documented recipe re-queues a job whose worker is alive
and beating. The how-to says pruning is for "heartbeats of old worker runs" and stalled
jobs are those of workers "terminated without a regular shutdown"
(docs/howto/production/retry_stalled_jobs.md); this worker was neither. Its next
fetch_job also fails (the foreign key to procrastinate_workers), which the script shows.
"""

from __future__ import annotations

import sys

import psycopg
from _story import Story, finish, run, say
from procrastinate import exceptions


async def steps(s: Story) -> int:
    job_id = await s.defer()
    await s.start("w0")
    held = await s.fetch("w0")
    if held is None or held.id != job_id:
        return finish(False, "w0 did not fetch the job")
    s.stand_still("w0", 31)
    await s.start("w1")
    say("w0 wakes and its heartbeat loop runs")
    await s.beat("w0")
    await s.beat("w0")
    gone = "no row" in s.worker_row("w0")
    say(f"nobody else fetched job {job_id}: {s.job_row(job_id)}")
    stalled = list(await s.jm.get_stalled_jobs())
    say(f"get_stalled_jobs() right after w0's heartbeats -> {[j.id for j in stalled]}")
    await s.defer()
    try:
        await s.fetch("w0")
    except exceptions.ConnectorException as exc:
        cause = exc.__cause__
        kind = type(cause).__name__ if isinstance(cause, psycopg.Error) else "error"
        say(f"worker w0: fetch_job -> raised {kind}: {str(cause).splitlines()[0]}")
    if not gone or job_id not in [j.id for j in stalled]:
        return finish(False, "w0's heartbeat still landed, or its job is not stalled")
    return finish(
        True,
        "a worker that stood still 31 s while another worker started was pruned: "
        "once it ran again its heartbeats updated no row, so job "
        f"{job_id}, which it still ran and nobody else had fetched, stayed stalled "
        "for the documented recipe to re-queue, and its next fetch_job failed",
    )


if __name__ == "__main__":
    sys.exit(run(steps))
