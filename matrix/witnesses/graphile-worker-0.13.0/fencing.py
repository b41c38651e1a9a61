"""fencing, graphile-worker 0.13.0: an execution whose lock expired completes the job another runs.

Replays matrix/results/counterexamples/graphile-worker-0.13.0/fencing.txt (a worker holds a
job past the lock, another worker's `get_job` takes it again, and the first worker's
completion is accepted on the job the second now holds) with the package's installed
functions, called as its worker calls them (see `_graphile.py`; time: graphile-worker's
`locked_at` is rewritten 4 hours 1 second into the past, not the harness's clock).

Bug or design: graphile-worker promises at-least-once execution and treats a lock older
than 4 hours as a dead worker's (README "What if something goes wrong?": "those jobs
remain locked for 4 hours, after which point they're available to be processed again
automatically"; `get_job`'s `job_expiry interval = interval '4 hours'`, sql/000009.sql).
What it does not say is that the first execution, if it was merely slow, still settles
the job: `complete_job` (sql/000003.sql) deletes `where id = job_id` without looking at
`locked_by` or `attempts`, so a stale completion deletes the row the second execution
holds, and that execution's own `complete_job` then deletes nothing (dist/worker.js
ignores the result). `fail_job` does check the holder (`and locked_by = worker_id`), so
one settle is fenced by worker and the other is not. No fencing is promised; the
witness shows what happens, a maintainer judges whether it is a bug.
"""

import sys

from _graphile import Graphile


def main(dsn: str) -> int:
    g = Graphile(dsn)
    job_id = g.add_job()
    first = g.get_job("worker-aaaaaaaaaaaa")
    assert first is not None
    g.age_locks()
    second = g.get_job("worker-bbbbbbbbbbbb")
    if second is None or second["id"] != job_id:
        print("NOT REPRODUCED: the expired job was not fetched again")
        return 1
    holder = g.row(job_id)
    g.complete("worker-aaaaaaaaaaaa", first)
    after = g.row(job_id)
    g.complete("worker-bbbbbbbbbbbb", second)
    if holder and holder["locked_by"] == "worker-bbbbbbbbbbbb" and after is None:
        print(
            "WITNESSED: while worker B held the job (attempt 2, locked by B), complete_job from "
            "worker A's expired attempt 1 deleted it: graphile-worker 0.13.0 completes by job "
            "id alone"
        )
        return 0
    print("NOT REPRODUCED: the stale completion did not delete the job worker B held")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
