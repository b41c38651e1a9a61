"""single-completion, oban 0.6.3: a rescued execution's late ack completes the job a
second time.

Replays matrix/results/counterexamples/oban-0.6.3/single-completion.txt: producer w0
fetches job1 and runs past the lease; the Lifeline rescues it and w1 fetches it; w0's
run ends and its ack `completed` is taken; w1's run ends and its ack `completed` is
taken too. Steps and time: see `../_oban.py` (oban's own fetch, executor, ack, rescue;
the job's `attempted_at` is moved 31 s into the past).

Why a bug, not a design: 0.6.3's `ack_job.sql` updates `WHERE id = %(id)s` and nothing
else (oban/queries/ack_job.sql:10), so both executions' acks commit a completion. The
next release matched acks `AND state = 'executing'` (0.6.7, ack_job.sql:11), exactly to
stop an ack landing on a job that is not executing; the same script in 0.6.7's venv
prints NOT REPRODUCED.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _oban import Story, finish, rescued, run, say


async def steps(s: Story) -> int:
    job_id, stale, owner = await rescued(s)
    say("w0's run ends")
    first = await s.run_and_ack("w0", stale)
    at_first = s.completed_at(job_id)
    await asyncio.sleep(0.01)  # the two acks' completed_at differ, so both show
    say("w1's run ends")
    second = await s.run_and_ack("w1", owner)
    at_second = s.completed_at(job_id)
    if not (first and second and at_first != at_second):
        return finish(False, "only one of the two completions was committed")
    return finish(
        True,
        f"job {job_id} was completed twice: the rescued execution's ack and then the "
        "new execution's ack both matched and each wrote completed_at "
        f"({at_first:%H:%M:%S.%f}, then {at_second:%H:%M:%S.%f}); 0.6.3 acks by id alone",
    )


if __name__ == "__main__":
    sys.exit(run(steps))
