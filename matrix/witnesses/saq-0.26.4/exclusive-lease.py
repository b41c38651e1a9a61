"""exclusive-lease, saq 0.26.4: a swept execution's failure hands the job out a third time.

Replays matrix/results/counterexamples/saq-0.26.4/exclusive-lease.txt: worker w1
claims job2 and stands still past saq's heartbeat; at t=91s the sweep re-queues job2
and w0 takes it (lease until t=121s); w1 wakes and its failure of job2 is accepted,
which writes job2 back to `queued` (with w1's attempt count), and job2 is granted once
more at t=91s while w0's lease runs (the other steps only bring the workers there; in
the counterexample the third grant goes to w0 itself, a worker that runs several jobs
at once). Here with saq's own worker processes (`_saq.py`): worker A's execution 1 is
frozen (SIGSTOP), saq's sweep re-queues the job after its 5 s abort wait, worker B
takes it (execution 2); A is thawed, execution 1 raises, saq's retry re-queues the job
by key, and A, free again, starts execution 3 while B's execution 2 runs on; both
heartbeat (their `job.update()` writes are seen in saq's table).

Why a bug and not a design: saq hands a stuck job to a new execution only through
its sweep, which first asks the old execution to stop (`abort` writes `aborting`,
`saq/queue/postgres.py` lines 573-579) and re-queues the job after its wait (lines
444-450); it never means two executions to run at once, and it checks the heartbeat
of the running one before it sweeps (`Job.stuck`, `saq/job.py` lines 252-258: a job
touched within `heartbeat` seconds is not stuck). But the old execution's failure,
`job.retry(error)` (`saq/worker.py` lines 418-419), is written by `_update` (postgres.py
lines 471-476) `WHERE key = %(key)s`, and its `status = 'queued'` makes the job B is
running, with a fresh heartbeat, available to the next dequeue (lines 648-669), which
takes it: a third execution beside the second, not through the sweep at all.
"""

from _saq import Story, finish, run, say, stale_retry


async def steps(s: Story) -> int:
    retried, third, _ = await stale_retry(s)
    if third is None:
        return finish(False, "nobody took the job again after A's failure re-queued it")
    mark = s.last_write()
    b = await s.written("a heartbeat of B", mark, lambda w: w["worker_id"] == "B")
    a = await s.written("a heartbeat of execution 3", mark, lambda w: w["worker_id"] == third[1])
    for w in (b, a):
        if w is not None:
            say(f"  heartbeat: {s.write(w)}")
    runs = s.executions()
    say(f"executions started: {runs}; neither execution 2 nor 3 has been released")
    if a is None or b is None or s.log("B", "Finished"):
        return finish(False, "execution 2 and 3 were not both running and heartbeating")
    return finish(
        True,
        f"two executions of one job ran at once, both heartbeating: worker B's execution 2, "
        f"which saq's sweep had handed the job to, and worker {third[1]}'s execution 3, which "
        "saq started after the swept execution 1's failure re-queued the job by key "
        f"(write #{retried['n']}, status queued) while B's heartbeat was fresh",
    )


raise SystemExit(run(steps))
