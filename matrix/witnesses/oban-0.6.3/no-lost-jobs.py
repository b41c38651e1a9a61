"""no-lost-jobs, oban 0.6.3: a stale failure at the cap poisons the queue, and every job
in it is lost.

The matrix's first no-lost-jobs counterexamples for 0.6.3 (matrix/results/
counterexamples/oban-0.6.3/no-lost-jobs.txt) end with a job the queue shows done but
completed twice, or handed out again after its completion was accepted: the stale ack
of the single-completion and fencing witnesses. This script shows the path that loses
jobs outright, which tests/test_adapters_oban.py::
test_0_6_3_a_stale_failure_at_the_cap_poisons_the_queue pins down through the adapter:
producer w0 fetches a job (max_attempts 2) and runs past the lease; the Lifeline rescues
it and w1 fetches its last attempt; w0's run raises and its ack `retryable` is taken;
w1's node dies before acking. From then on every fetch of the queue raises, so neither
that job nor any job behind it runs again. Steps and time: see `../_oban.py` (oban's own
fetch, executor, ack, rescue, stager; the job's `attempted_at` is moved 31 s into the
past).

Why a bug, not a design: the executor decides `retryable` from the stale `Job` it holds
(attempt 1 < max_attempts, oban/_executor.py:97-107) and 0.6.3's ack applies it by id
in any state (ack_job.sql:10), leaving the row `retryable` at `attempt = max_attempts`.
The Stager makes it `available` and `fetch_jobs.sql` (lines 15-21) bumps `attempt`
past `max_attempts`, which the `attempt_range` check (install.sql:62) rejects: the
whole fetch statement fails, for every producer of the queue, every time (the producer
logs it and tries again, oban/_producer.py:262-263). The Lifeline only rescues
`executing` jobs (rescue_jobs.sql:16-18) and never clears it. 0.6.7 fixed both ends:
the fetch skips jobs at the cap (fetch_jobs.sql:26) and the Lifeline discards
`available` jobs at the cap (rescue_jobs.sql:21).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _oban import Story, finish, rescued, run, say


async def steps(s: Story) -> int:
    job_id, stale, _ = await rescued(s, max_attempts=2)
    say("w0's run ends: it raised")
    if not await s.run_and_ack("w0", stale, raises=True):
        return finish(False, "w0's late failure was not acked")
    say("w1's node dies before its run ends: no ack will come")
    behind = await s.enqueue(max_attempts=2)
    errors = []
    for node in ("w2", "w3", "w2"):
        await s.stage()
        errors.append(await s.fetch_raising(node))
        await s.lifeline()
    say(f"afterwards: {s.row(job_id)}; {s.row(behind)}")
    if not all(isinstance(e, Exception) and "attempt_range" in str(e) for e in errors):
        return finish(False, "a fetch did not raise the attempt_range check violation")
    return finish(
        True,
        f"after a stale execution's failure was acked as retryable on job {job_id} at "
        "its last attempt, every fetch of the queue raised a CheckViolation "
        "(attempt_range) and the Lifeline left it so: neither that job nor job "
        f"{behind} behind it can ever be fetched",
    )


if __name__ == "__main__":
    sys.exit(run(steps))
