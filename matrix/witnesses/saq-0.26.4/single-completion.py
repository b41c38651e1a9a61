"""single-completion, saq 0.26.4: a swept execution completes the job, then its new owner does.

Replays matrix/results/counterexamples/saq-0.26.4/single-completion.txt: worker w0
claims job2 and stands still past saq's heartbeat; at t=90s the sweep re-queues job2
and w1 takes it; w0 wakes and completes job2 (accepted), and at t=120s w1 completes it
too (accepted): two completions of one job (the other steps only bring the workers
there). Here with saq's own worker processes (`_saq.py`): worker A's execution 1 is
frozen (SIGSTOP), saq's sweep re-queues the job after its 5 s abort wait, worker B
runs it as execution 2; A is thawed and execution 1 returns, then execution 2 returns.

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

with no attempt, worker or status in the WHERE. So the job B is running is completed
by the execution saq had given up on, then completed again by B, and each worker
counts its completion (`Queue.finish`, `saq/queue/base.py` lines 307-308, into
`saq_stats`): the task ran twice and saq reports two successful completions of one
job.
"""

from _saq import Story, finish, run, say


async def steps(s: Story) -> int:
    mark = s.last_write()
    s.release(1, "return")
    stale = await s.written("A's completion", mark, lambda w: w["status"] == "complete")
    if stale is None or not await s.finished("A"):
        return finish(False, "worker A's completion of execution 1 was never written")
    say(f"worker A: execution 1 returned; saq's job.finish(COMPLETE) -> {s.write(stale)}")
    if stale["worker_id"] != "A" or s.log("B", "Finished"):
        return finish(False, "the completion written first was not A's, over B's running job")
    say("  (execution 2, worker B's, is still running: the row says complete)")
    mark = stale["n"]
    s.release(2, "return")
    own = await s.written(
        "B's completion", mark, lambda w: w["completed"] and w["worker_id"] == "B"
    )
    if own is None or not await s.finished("B"):
        return finish(False, "worker B's completion of execution 2 was never written")
    say(f"worker B: execution 2 returned; saq's job.finish(COMPLETE) -> {s.write(own)}")
    counted = await s.counted("A", "complete", 1) and await s.counted("B", "complete", 1)
    stats = {w: v.get("complete") for w, v in s.stats().items()}
    runs = s.executions()
    say(f"saq_stats, completions counted per worker: {stats}")
    say(f"executions of the job's task (its receipts): {runs}")
    if own["status"] != "complete" or not counted:
        return finish(False, f"B's completion did not land as well ({s.write(own)})")
    return finish(
        True,
        "saq completed one job twice: after its sweep re-queued the job from worker A's "
        "frozen execution (which it had asked to abort and which never stopped) and worker B "
        "took it, A's execution completed it, written by key over B's running job, and then "
        "B completed it again; both workers count a completion in saq_stats "
        f"({stats}) and the task ran {len(runs)} times",
    )


raise SystemExit(run(steps))
