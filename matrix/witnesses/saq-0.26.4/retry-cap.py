"""retry-cap, saq 0.26.4: a job with retries=3 runs a fourth time.

Replays matrix/results/counterexamples/saq-0.26.4/retry-cap.txt.
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
