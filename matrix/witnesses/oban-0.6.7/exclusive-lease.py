"""exclusive-lease, oban 0.6.7: a job is fetched again while the producer that fetched it
last is still running it, well inside its lease.

Replays matrix/results/counterexamples/oban-0.6.7/exclusive-lease.txt: producer w0
fetches job1 and runs past the lease; the Lifeline rescues it and w1 fetches it; w0's
run raises and its ack `retryable` (due at once) is taken; the Stager makes the job
available and w0 fetches it again while w1 is still running it. Steps and time: see
`../_oban.py` (oban's own fetch, executor, ack, rescue, stager; the job's `attempted_at`
is moved 31 s into the past).

Why a bug, not a design: w1's execution is 0 s old, nowhere near the Lifeline's
rescue_after, yet the job runs twice at once: the rescued execution's failure ack is
applied to the job by id (and `state = 'executing'`, oban/queries/ack_job.sql:10-11,
true of w1's execution). 0.7.0 fences the ack on the execution's `attempted_at`
(ack_job.sql:12); the same script in 0.7.0's venv prints NOT REPRODUCED.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _oban import Story, dsn, finish, say


async def main() -> int:
    s = Story(dsn())
    await s.open()
    try:
        job_id = await s.enqueue()
        stale = await s.fetch("w0")
        if stale is None:
            return finish(False, "w0 fetched nothing")
        s.has_run(job_id)
        await s.lifeline()
        owner = await s.fetch("w1")
        if owner is None or owner.id != job_id:
            return finish(False, "w1 did not fetch the rescued job")
        say("w0's run ends: it raised (its retry is due at once)")
        await s.run_and_ack("w0", stale, raises=True)
        await s.stage()
        again = await s.fetch("w0")
        if again is None or again.id != job_id:
            return finish(False, "the job was not fetched again while w1 runs it")
        return finish(
            True,
            f"while producer w1 was running job {job_id} (attempt {owner.attempt}, "
            "fetched 0 s before), the rescued execution's late failure was acked and the "
            f"job was fetched again (attempt {again.attempt}): two executions at once",
        )
    finally:
        await s.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
