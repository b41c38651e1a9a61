"""single-completion, saq 0.26.4: a swept execution completes the job after its new owner did.

Replays matrix/results/counterexamples/saq-0.26.4/single-completion.txt: worker w0
claims job1 (its second attempt, after a failure) and stands still past saq's
heartbeat; at t=90s the sweep re-queues job1 and w3 takes it (attempt 3) and
completes it at t=120s (accepted); then w0 wakes and completes job1 too (accepted):
two completions of one job (the other steps only bring the workers there). Here with
saq's own worker processes (`_saq.py`): worker A's execution 1 is frozen (SIGSTOP),
saq's sweep re-queues the job after its 5 s abort wait, worker B runs it as execution
2 and completes it; then A is thawed and execution 1 returns: saq completes the job
again. (`no-lost-jobs.py` plays the same steps and judges the final state.)

Why a bug and not at-least-once by design: saq's sweep does not merely re-run a job
it thinks lost, it asks the old execution to stop: `abort` writes the job `aborting`
(`saq/queue/postgres.py` lines 573-579), which the old worker's `abort` upkeep reads
to cancel exactly that task (`saq/worker.py` lines 311-339). When the execution does
not stop within the wait, the sweep re-queues the job anyway (postgres.py lines
444-450: `except asyncio.TimeoutError: logger.info("Could not abort job %s", key)`
and then `if job.retryable: await self.retry(...)`), and nothing marks the old
execution as revoked: its worker's abort upkeep skips a job whose row no longer says
`aborting`/`aborted` (worker.py line 323, `if not job or job.status not in
(Status.ABORTING, Status.ABORTED): continue`), and its completion, `job.finish(
Status.COMPLETE)` (worker.py lines 376-377), is written by `_update` (postgres.py
lines 471-476) as

    UPDATE {jobs_table} SET job = %(job)s ,status = %(status)s ,scheduled = %(scheduled)s
    {expire_at} WHERE key = %(key)s

with no attempt, worker or status in the WHERE. So the job B completed is completed
again by the execution saq had given up on, the final row records that stale
attempt, and each worker counts its completion (`Queue.finish`, `saq/queue/base.py`
lines 307-308, into `saq_stats`): the task ran twice and saq reports two successful
completions of one job.
"""

from _saq import Story, finish, owner_then_stale, run, say


async def steps(s: Story) -> int:
    if await owner_then_stale(s) is None:
        return finish(False, "the two completions were not both written")
    counted = await s.counted("A", "complete", 1) and await s.counted("B", "complete", 1)
    stats = {w: v.get("complete") for w, v in s.stats().items()}
    runs = s.executions()
    say(f"saq_stats, completions counted per worker: {stats}")
    say(f"executions of the job's task (its receipts): {runs}")
    if not counted:
        return finish(False, f"saq did not count both completions ({stats})")
    return finish(
        True,
        "saq completed one job twice: after its sweep re-queued the job from worker A's "
        "frozen execution (which it had asked to abort and which never stopped), worker B "
        "ran and completed it, and then A's execution completed it again, written by key "
        f"like the first; both workers count a completion in saq_stats ({stats}) and the "
        f"task ran {len(runs)} times",
    )


raise SystemExit(run(steps))
