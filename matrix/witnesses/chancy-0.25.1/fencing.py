"""fencing, chancy 0.25.1: a recovered execution completes the job while another worker runs it.

Replays matrix/results/counterexamples/chancy-0.25.1/fencing.txt: worker w0 claims and
goes silent past the lease, the sweeper's Recovery puts the job back and w1 fetches it;
w0's stale completion is accepted while w1 holds the job (t=30), and then w1's failure
is accepted too (t=60), on a job chancy had already recorded completed, which is the
call the judge flags ("job1 was already completed by w0"). Here with chancy's own
workers and Recovery (see `_stale_worker.py`; the rule program
`single-completion.program.json` beside it shows the double completion in 7 machine
steps; time: chancy's own `chancy_workers.last_seen` is rewritten 60 s into the past):
while worker B still runs the recovered job, the recovered execution on worker A
returns and chancy writes it `succeeded`; then B's execution raises, and chancy writes
its failure over the completed job as well.

Why a bug, not a design: chancy 0.25.1 has no fencing token; its worker writes every
job update `WHERE id = %(id)s` and nothing else (`chancy/worker.py`,
`Worker._maintain_updates`, lines 503-519), so a worker Recovery took the job from
still marks it succeeded, under the worker that holds it now, and that worker's
result then lands on a finished job. 0.26.0 fixed exactly this with a per-fetch
`claim_id` that `Worker.flush` matches, and says so in `chancy/plugins/recovery.py`
(the `Recovery` docstring): "Recovery invalidates the old execution's claim [...]
Late updates from the old claim are discarded even if it keeps running." The same
script in chancy 0.26.0's venv prints NOT REPRODUCED.
"""

import sys
from typing import Any

from _stale_worker import main


def judge(seen: dict[str, Any]) -> tuple[bool, str]:
    running, late, b_wrote = seen.get("b_running"), seen.get("after_a"), seen.get("b_wrote")
    if running is None or late is None:
        return False, "the scenario did not get as far as the late completion (see above)"
    if running["taken_by"] != "worker-b" or running["state"] != "running":
        holder = running["taken_by"]
        return False, f"worker B did not hold the job when A's result came ({holder} did)"
    if late["state"] != "succeeded":
        return False, "worker A's late completion was discarded while worker B held the job"
    if b_wrote is None:
        return False, "worker B's failure, after A's completion, was not written"
    return True, (
        "while worker B held the recovered job and was still running it, the execution "
        "Recovery had taken it from (worker A) completed it, and B's failure was then "
        f"written over the completed job ({b_wrote}): chancy 0.25.1 writes each "
        "worker's update by job id, with no claim to check"
    )


if __name__ == "__main__":
    sys.exit(main(judge, b_waits=True, b_fails=True))
