"""retry-cap, saq 0.26.4: a job with retries=3 runs four times; stale retries rewind its count.

Replays matrix/results/counterexamples/saq-0.26.4/retry-cap.txt: job2 (3 attempts
promised) is claimed by w1 (attempt 1), swept and claimed by w0 (attempt 2); w1's late
failure is accepted, re-queues it and writes attempt 1 back, so w1 claims it as
attempt 2 again; w0's late failure then writes attempt 2 back, and w0 claims it a
fourth time (attempt 3). Here with saq's own worker processes (`_saq.py`): worker A's
execution 1 is frozen (SIGSTOP) and swept, worker B runs execution 2 (attempts 2); A
is thawed and execution 1 raises: saq's retry writes the job back `queued` with
attempts 1, and A starts execution 3 (attempts 2) beside B; then B's execution 2
raises too, its retry writes attempts 2 back, and execution 4 starts (attempts 3).
Four executions of a job saq was told to run at most three times.

Why a bug and not a design: `retries` is saq's cap on executions, not on failures.
The worker adds one to the job's `attempts` when it starts it (`saq/worker.py` line
356), and both the worker's failure path and the sweep re-queue it only while
`retryable` (`saq/worker.py` lines 418-421, `saq/queue/postgres.py` lines 449-452;
`saq/job.py` lines 260-262: `return self.retries > self.attempts`), else the job ends
`failed` or `aborted`: with `retries=3` a job runs at most three times. But the count
lives in the job blob each write carries whole, and a stale execution's retry writes
its own, older count back by key (`Queue.retry`, `saq/queue/base.py` lines 275-285;
`_retry`, postgres.py lines 816-823; `_update`, lines 471-476, `WHERE key =
%(key)s`), so the next execution counts from it again.
"""

from _saq import Story, finish, run, say, stale_retry


async def steps(s: Story) -> int:
    retried, third, _ = await stale_retry(s)
    if third is None:
        return finish(False, "nobody took the job again after A's failure re-queued it")
    mark = s.last_write()
    s.release(2, "raise")
    again = await s.written(
        "B's retry", mark, lambda w: w["status"] == "queued" and w["worker_id"] == "B"
    )
    if again is None:
        return finish(False, "worker B's failure of execution 2 was never written")
    say(f"worker B: execution 2 raised; saq's job.retry(error) -> {s.write(again)}")
    fourth = await s.running(4)
    runs = s.executions()
    say(f"executions of the job's task: {runs}")
    if fourth is None:
        return finish(False, f"the job ran {len(runs)} times, not more than its retries=3")
    return finish(
        True,
        f"a job enqueued with retries=3 ran {len(runs)} times (worker and attempts per "
        f"execution: {[(w, a) for _, w, a in runs]}): the swept execution's failure wrote "
        f"its own attempt count back by key (attempts={retried['attempts']} while execution 2 "
        "ran), so saq's cap, `retries > attempts`, was counted from there again",
    )


raise SystemExit(run(steps))
