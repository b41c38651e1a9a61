"""fencing, saq 0.26.4: a swept execution's failure re-queues the job its new owner runs.

Replays matrix/results/counterexamples/saq-0.26.4/fencing.txt: worker w0 claims job2
and stands still past saq's heartbeat; at t=90s the sweep re-queues job2 and w1 takes
it; w0 wakes and its failure report of job2 is accepted although the job had been
granted again (the other steps only bring the workers there). Here with saq's own
worker processes (`_saq.py`): worker A's execution 1 is frozen (SIGSTOP), saq's sweep
re-queues the job after its 5 s abort wait, and worker B takes it (execution 2); A is
thawed and execution 1 raises while B's execution 2 is running and heartbeating. saq
writes A's retry over B's running job: the row goes back to `queued`, with A's
attempt count.

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
failure re-queues the current owner's job and writes its old attempt count back; the
worker's abort upkeep, which could have stopped it, skips jobs whose row no longer
says aborting (worker.py line 323).
"""

from _saq import Story, finish, run, say, stale_retry


async def steps(s: Story) -> int:
    retried, third, since = await stale_retry(s)
    say(f"executions started: {s.executions()}; execution 2 (worker B) has not been released")
    again = f"; {third[1]} then started execution 3 beside B" if third else ""
    return finish(
        True,
        "after saq's sweep re-queued the job from worker A's frozen execution and worker B "
        "took it, A's execution raised and saq accepted its failure: job.retry wrote the job "
        f"back to queued by key (attempts={retried['attempts']}, A's count) over B's running "
        f"job, {since:.1f} s after a heartbeat of B, with nothing in the UPDATE to tell the "
        f"executions apart{again}",
    )


raise SystemExit(run(steps))
