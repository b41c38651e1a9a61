"""fencing, pgqueuer 1.6: a stale worker's retry re-queues the job another worker now holds.

Replays matrix/results/counterexamples/pgqueuer-1.6/fencing.txt (w0 claims and stalls
past the 30 s heartbeat timeout, w1's dequeue re-picks the job, w0 resumes and its
failure is accepted on the job w1 holds) with pgqueuer's own queue managers (see
`_stale_manager.py`; time: pgqueuer's own `pgqueuer.heartbeat` column is rewritten 300
s into the past).

Why a bug, not a design: a re-pick is meant to hand the job over. `qb.py`
(`build_dequeue_query`, the comment above the stale CTE, lines 420-423): "re-picking a
stale job only transfers ownership of a row". But nothing after the re-pick checks
ownership: `build_retry_job_query` (qb.py lines 805-819) sets `status = 'queued',
queue_manager_id = NULL` `WHERE id = $1` alone, and `build_log_job_query` (lines
677-715) deletes `WHERE id = ANY(...)` alone, so the manager the job was taken from
still re-queues (or deletes) it under its new owner.
"""

import sys
from typing import Any

from _stale_manager import main


def judge(seen: dict[str, Any]) -> tuple[bool, str]:
    taken, late = seen.get("repicked"), seen.get("raise 1")
    if taken is None or late is None:
        return False, "the scenario did not get as far as the stale failure (see above)"
    if taken["by"] != "B" or taken["row"] is None or taken["row"]["qm"] != "B":
        return False, "manager B did not re-pick the job"
    if late["row"] is None or late["row"]["status"] != "queued":
        return False, "manager A's late failure did not change the job B holds"
    return True, (
        "after manager B re-picked the stale job (and while B's execution still ran), "
        "manager A's late failure was applied to it: Queries.retry_job put the row back "
        "to queued with no queue manager, matching the job by id alone"
    )


if __name__ == "__main__":
    sys.exit(main(judge, [("raise", "1")]))
