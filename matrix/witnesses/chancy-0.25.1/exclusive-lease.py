"""exclusive-lease, chancy 0.25.1: a recovered execution's failure re-queues the job B runs.

Replays matrix/results/counterexamples/chancy-0.25.1/exclusive-lease.txt: worker w0
fetches job2 at t=60 and stalls; at t=90 the sweeper's Recovery puts job2 back and w1
fetches it; w0's stale failure of job2 is accepted, which makes job2 `retrying`, and
w0 fetches it again at once while w1 holds it until t=120 (the steps on job1 before
t=60 only bring w0 there). Here with chancy's own workers and Recovery (see
`_two_owners.py`; time: chancy's own `chancy_workers.last_seen` of worker-a is
rewritten 60 s into the past): execution 1 (worker A, recovered) raises; chancy writes
its failure over worker B's running job, and a worker fetches and starts execution 3
while execution 2 on worker B, whose heartbeat chancy saw under a second before, is
still running. The same script in chancy 0.26.0's venv prints NOT REPRODUCED.

Why a bug, not a design: chancy 0.25.1's worker writes every job update `WHERE id =
%(id)s` and nothing else (`chancy/worker.py`, `Worker._maintain_updates`, lines
503-519), so the failure of the execution Recovery took the job from sets the row of
the job B now runs back to `retrying`, and `Worker.fetch_jobs` (lines 716-746) hands
out any `retrying` job with `attempts < max_attempts`. Recovery exists for workers
that are lost, and leaves alone every job whose worker was seen within the heartbeat
timeout (`chancy/plugins/recovery.py`, `recover`, lines 87-105): B is such a worker,
yet its job is run a second time beside it. The next release fixed the cause: 0.26.0
matches updates `AND claim_id IS NOT DISTINCT FROM` the fetch's claim (`Worker.flush`)
and says in `chancy/plugins/recovery.py` (the `Recovery` docstring): "Late updates
from the old claim are discarded even if it keeps running."
"""

import sys

from _stale_worker import say, shown
from _two_owners import Run, main


async def steps(run: Run) -> tuple[bool, str]:
    failed = await run.finish(1, fail=True)
    if failed is None:
        return False, "execution 1's failure was never reported written"
    wrote, now = failed
    say(f"execution 1 (worker A, recovered) raised; chancy wrote state={wrote} by id")
    say(f"  the row just after: {shown(now)}")
    if wrote != "retrying":
        return False, f"chancy wrote execution 1's failure as {wrote}, not retrying"
    again = await run.fetched_again(3)
    if again is None:
        return False, "no worker fetched the job again while worker B ran it"
    age = run.last_seen_age("worker-b")
    say(f"execution 3 of the job started -> {shown(again)}")
    say(f"execution 2 (worker B) is still running; chancy saw worker-b {age:.1f} s ago")
    if again["state"] != "running" or again["taken_by"] == "worker-b":
        return False, f"the job was not handed to another worker ({shown(again)})"
    return True, (
        f"while worker B (its heartbeat seen {age:.1f} s before) still ran the job Recovery "
        "gave it, the recovered execution's failure made the job retrying and "
        f"{again['taken_by']} fetched and ran it beside B: chancy 0.25.1 writes the stale "
        "worker's update by job id, so two executions of one job run at once"
    )


if __name__ == "__main__":
    sys.exit(main(steps))
