"""exclusive-lease, saq 0.26.4: the job is handed out again while its owner runs it.

Replays matrix/results/counterexamples/saq-0.26.4/exclusive-lease.txt.
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
