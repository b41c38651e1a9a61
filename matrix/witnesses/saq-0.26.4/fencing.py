"""fencing, saq 0.26.4: writes of executions that no longer hold the job are accepted.

Replays matrix/results/counterexamples/saq-0.26.4/fencing.txt: worker w1 claims job2
and stands still past saq's heartbeat; at t=90s the sweep re-queues job2 and w0 takes
it; w1 wakes and its failure report of job2 is accepted although the job had been
granted again (the other steps only bring the workers there). Here with saq's own
worker processes (`_saq.py`): worker A's execution 1 is frozen (SIGSTOP), saq's sweep
re-queues the job after its 5 s abort wait, and worker B takes it (execution 2); A is
thawed and execution 1 raises while B's execution 2 is running and heartbeating. saq
writes A's retry over B's running job: the row goes back to `queued`, with A's
attempt count, and A takes the job again (execution 3). Then B's execution 2, whose
job has now been handed to execution 3, returns, and saq writes its completion over
execution 3's running job. Both stale writes, a failure and a completion, are
accepted.

Why a bug and not a design: the sweep hands the job to a new execution after asking
the old one to stop (`abort` writes `aborting`, `saq/queue/postgres.py` lines
573-579; the sweep re-queues it after its wait, lines 444-450, whether or not it
stopped), so from then on the old execution is no longer the job's. But every write
of the old execution is matched by key alone. Its failure takes the worker's retry
path (`saq/worker.py` lines 418-419: `if job.retryable: await job.retry(error)`, its
own in-memory `attempts` of 1 against `retries=3`), `Queue.retry` (`saq/queue/base.py`
lines 275-285) and `_retry` (postgres.py lines 816-823: `update(job,
status=Status.QUEUED, ...)`), down to `_update` (lines 471-476):

    UPDATE {jobs_table} SET job = %(job)s ,status = %(status)s ,scheduled = %(scheduled)s
    {expire_at} WHERE key = %(key)s

No attempt count, worker id or expected status is compared, so the stale execution's
failure re-queues the current owner's job and writes its old attempt count back, and
a completion (`job.finish(Status.COMPLETE)`, worker.py lines 376-377, the same
`_update`) ends whichever execution holds the job now; the worker's abort upkeep,
which could have stopped the old execution, skips jobs whose row no longer says
aborting (worker.py line 323).
"""

from _saq import Story, finish, run, say, stale_retry


async def steps(s: Story) -> int:
    retried, third, since = await stale_retry(s)
    if third is None:
        return finish(False, "nobody took the job again after A's failure re-queued it")
    say(f"  (A's failure was accepted {since:.1f} s after a heartbeat of B)")
    mark = s.last_write()
    s.release(2, "return")
    landed = await s.written(
        "B's completion", mark, lambda w: w["status"] == "complete" and w["worker_id"] == "B"
    )
    if landed is None or not await s.finished("B"):
        return finish(False, "worker B's completion of execution 2 was never written")
    say(f"worker B: execution 2 returned; saq's job.finish(COMPLETE) -> {s.write(landed)}")
    runs = s.executions()
    say(f"executions started: {runs}; execution 3 ({third[1]}'s) has not been released")
    if s.log(third[1], "Finished"):
        return finish(False, "execution 3 had ended before B's completion landed")
    return finish(
        True,
        "saq accepted two writes of executions that no longer held the job, both by key: "
        "worker A's execution 1, which saq's sweep had re-queued the job from, raised and "
        "its retry put the job B was running back to queued "
        f"(attempts={retried['attempts']}); then B's execution 2, whose job had meanwhile "
        f"been handed to execution 3 ({third[1]}), returned and its completion marked the "
        "job complete while execution 3 was running it",
    )


raise SystemExit(run(steps))
