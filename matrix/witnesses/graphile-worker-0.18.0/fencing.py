"""fencing, graphile-worker 0.18.0: an execution whose lock expired completes the job another runs.

Replays matrix/results/counterexamples/graphile-worker-0.18.0/fencing.txt (a worker holds a
job past the lock, the pool's `resetLockedAt` sweep frees it, another worker fetches it,
and the first worker's completion is accepted on the job the second now holds) with the
package's own statements (see `_graphile.py`; time: graphile-worker's `locked_at` is
rewritten 4 hours 1 second into the past, not the harness's clock). The matrix's
program may re-grant the job to another slot of the same pool (same `locked_by`) or to
another pool; the completion looks at neither, and the witness uses two pools.

Bug or design: graphile-worker promises at-least-once execution and treats a lock older
than 4 hours as a dead worker's (README "What if something goes wrong?": "those jobs
remain locked for 4 hours, after which point they're available to be processed again
automatically"; dist/sql/resetLockedAt.js). What it does not say is that the first
execution, if it was merely slow, still settles the job: `batchCompleteJobs`
(dist/sql/completeJobs.js) deletes `where id = $1` with no check of `locked_by` or
`attempts`, so a stale completion deletes the row the second execution holds, and that
execution's own completion then deletes nothing (the worker ignores the count). Its
failure path does check the holder (`batchFailJobs`: `and locked_by = $1`), so the
package fences one settle and not the other. No fencing is promised; the witness shows
what happens, a maintainer judges whether it is a bug.
"""

import sys

from _graphile import Graphile


def main(dsn: str) -> int:
    g = Graphile(dsn)
    job_id = g.add_job()
    first = g.get_job("pool-A")
    assert first is not None
    g.age_locks()
    g.reset_locked_at()
    g.row(job_id)
    second = g.get_job("pool-B")
    if second is None or second["id"] != job_id:
        print("NOT REPRODUCED: the expired job was not fetched again")
        return 1
    holder = g.row(job_id)
    stale = g.complete("pool-A", first)
    after = g.row(job_id)
    g.complete("pool-B", second)
    if holder and holder["locked_by"] == "pool-B" and stale == 1 and after is None:
        print(
            "WITNESSED: while pool-B held the job (attempt 2, locked by pool-B), the completion "
            "of pool-A's expired attempt 1 was accepted and deleted it: graphile-worker 0.18.0 "
            "completes by job id alone"
        )
        return 0
    print("NOT REPRODUCED: the stale completion did not delete the job pool-B held")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
