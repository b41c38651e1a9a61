"""exclusive-lease, pgqueuer 1.6: another worker gets the job while its owner's lease is fresh.

Replays matrix/results/counterexamples/pgqueuer-1.6/exclusive-lease.txt (w0 claims job1
and stalls past the 30 s heartbeat timeout, w1's dequeue re-picks it, w0 resumes and its
failure is accepted, re-queueing job1, and w0's next claim gets job1 again at t=30 s
while w1's lease runs until t=60 s) with pgqueuer's own queue managers (see
`_stale_manager.py`; time: pgqueuer's own `pgqueuer.heartbeat` column is rewritten 300 s
into the past). A is w0, B is w1. The counterexample's next claim is w0's; here it is a
third manager C that starts after the re-queue, so that its dequeue is the next one
deterministically (A and B sleep in their wait for a notification, which an UPDATE never
sends); any manager's next dequeue gets the queued row the same way.

Why a bug, not a design: pgqueuer hands a picked job out again only when its heartbeat
is older than `heartbeat_timeout` (`build_dequeue_query`, the `next_stale` CTE,
`adapters/persistence/qb.py` lines 425-437) and calls a re-pick a transfer of
ownership ("re-picking a stale job only transfers ownership of a row", lines 420-422).
Here the job goes to C while B, its owner, still runs it with a heartbeat seconds old,
because A's late `retry_job` (`WHERE id = $1` alone, qb.py lines 805-819; called from
`QueueManager._dispatch`, `core/qm.py` line 587) re-queued it under B: two managers run
one job at once and neither has gone silent.
"""

import sys
from typing import Any

from _stale_manager import main


def judge(seen: dict[str, Any]) -> tuple[bool, str]:
    taken, third = seen.get("repicked"), seen.get("start C")
    if taken is None or third is None:
        return False, "the scenario did not get as far as the third manager (see above)"
    if taken["by"] != "B" or taken["row"] is None or taken["row"]["qm"] != "B":
        return False, "manager B did not re-pick the stale job"
    if third["running"] != ["A", "B", "C"]:
        return False, f"executions ran on {third['running']}, not A, B and then C"
    if third["row"] is None or third["row"]["qm"] != "C" or third["row"]["status"] != "picked":
        return False, "no third manager got the job while B held it"
    return True, (
        "while manager B ran the job it had re-picked (its heartbeat seconds old, the "
        "timeout 120 s), manager C picked it too, because manager A's late failure had "
        "re-queued it by id: two managers ran the job at once, neither gone silent"
    )


if __name__ == "__main__":
    sys.exit(main(judge, [("raise", "1"), ("start", "C")]))
