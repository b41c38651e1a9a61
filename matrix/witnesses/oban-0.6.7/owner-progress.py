"""owner-progress, oban 0.6.7: the producer running a job's current execution has its ack
refused, because a rescued execution's late failure was taken first.

Replays matrix/results/counterexamples/oban-0.6.7/owner-progress.txt: producer w0
fetches job1 and runs past the lease; the Lifeline rescues it and w1 fetches it; w0's
run raises and its ack `retryable` is taken; w1's run ends well inside its lease and
its ack `completed` matches nothing. Steps and time: see `../_oban.py` (oban's own
fetch, executor, ack, rescue; the job's `attempted_at` is moved 31 s into the past).

Why a bug, not a design: the refusal is not a rescue of w1's execution (it is 0 s old,
the Lifeline rescues after 30 s); it is the echo of w0's stale ack, which 0.6.7's
`ack_job.sql` took because it matches `WHERE id = %(id)s AND state = 'executing'`
(oban/queries/ack_job.sql:10-11), true of w1's execution. w1's result is dropped and
the job runs again. 0.7.0 adds `AND attempted_at = %(attempted_at)s` (ack_job.sql:12),
which refuses w0's ack instead; the same script in 0.7.0's venv prints NOT REPRODUCED.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _oban import Story, finish, rescued, run, say


async def steps(s: Story) -> int:
    job_id, stale, owner = await rescued(s)
    say("w0's run ends: it raised")
    await s.run_and_ack("w0", stale, raises=True)
    say("w1's run ends, its execution 0 s old")
    if await s.run_and_ack("w1", owner):
        return finish(False, "w1's ack matched")
    return finish(
        True,
        f"producer w1, running job {job_id}'s current execution (attempt "
        f"{owner.attempt}, fetched after the Lifeline's rescue, nowhere near "
        "rescue_after), had its completed ack match nothing, because the rescued "
        f"execution's late failure (attempt {stale.attempt}) had been acked first",
    )


if __name__ == "__main__":
    sys.exit(run(steps))
