"""fencing, oban 0.6.7: a rescued execution's late failure is acked while another producer
runs the job.

Replays matrix/results/counterexamples/oban-0.6.7/fencing.txt: producer w0 fetches job1
and runs past the lease; the Lifeline rescues it and w1 fetches it; w0's run raises and
its ack `retryable` is taken while w1 is still running the job (the same holds for a
late `completed` ack). Steps and time: see `../_oban.py` (oban's own fetch, executor,
ack, rescue; the job's `attempted_at` is moved 31 s into the past).

Why a bug, not a design: 0.6.7's `ack_job.sql` updates `WHERE id = %(id)s AND state =
'executing'` (oban/queries/ack_job.sql:10-11): once the rescued job is fetched again it
is `executing`, so the rescued execution's ack lands on the new execution. 0.7.0 adds
`AND attempted_at = %(attempted_at)s` (ack_job.sql:12), exactly so that a rescued
execution's ack cannot touch the job's next execution; the same script in 0.7.0's venv
prints NOT REPRODUCED.
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
        say("w0's run ends while w1 is running the job: it raised")
        if not await s.run_and_ack("w0", stale, raises=True):
            return finish(False, "w0's late ack matched nothing")
        return finish(
            True,
            f"after the Lifeline rescued job {job_id} and producer w1 fetched it (attempt "
            f"{owner.attempt}), the rescued execution's late failure (attempt "
            f"{stale.attempt}) was acked and made the job retryable while w1 was still "
            "running it",
        )
    finally:
        await s.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
