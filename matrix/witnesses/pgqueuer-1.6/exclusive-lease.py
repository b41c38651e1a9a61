"""exclusive-lease, pgqueuer 1.6: a third worker gets the job while its owner's lease is fresh.

Replays matrix/results/counterexamples/pgqueuer-1.6/exclusive-lease.txt (w0 claims and
stalls past the 30 s heartbeat timeout, w1's dequeue re-picks the job, w0's late
failure re-queues it, and the job is handed out again while w1's lease is unexpired)
with pgqueuer's own queue managers (see `_stale_manager.py`; time: pgqueuer's own
`pgqueuer.heartbeat` column is rewritten 300 s into the past).

Why a bug, not a design: pgqueuer hands a picked job out again only when its heartbeat
is older than `heartbeat_timeout` (`build_dequeue_query`, the stale CTE, qb.py lines
425-440) and calls a re-pick a transfer of ownership ("re-picking a stale job only
transfers ownership of a row", lines 420-423). Here the job goes to a third manager
while its owner's heartbeat is seconds old, because the stale manager's
`retry_job` (`WHERE id = $1` alone, lines 805-819) re-queued it under the owner.
"""

import sys
from typing import Any

from _stale_manager import main


def judge(seen: dict[str, Any]) -> tuple[bool, str]:
    taken, third = seen.get("repicked"), seen.get("start C")
    if taken is None or third is None:
        return False, "the scenario did not get as far as the third manager (see above)"
    if third["running"][-1] != "C" or third["row"] is None or third["row"]["qm"] != "C":
        return False, "no third manager got the job while B held it"
    return True, (
        "while manager B ran the job it had re-picked (its heartbeat fresh), manager C "
        "picked it too, because manager A's late failure had re-queued it by id: two "
        "managers ran the job at once, neither lease expired"
    )


if __name__ == "__main__":
    sys.exit(main(judge, [("raise", "1"), ("start", "C")]))
