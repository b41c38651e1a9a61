"""fencing, chancy 0.25.1: a recovered execution completes the job while another worker runs it.

Replays matrix/results/counterexamples/chancy-0.25.1/fencing.txt (worker w0 claims and
goes silent past the lease, the sweeper's Recovery puts the job back, another worker
fetches it, and w0's stale call is accepted on the job the other worker now holds)
with chancy's own workers and Recovery (see `_stale_worker.py`; the rule program
`single-completion.program.json` beside it shows the same in 7 machine steps; time: chancy's own
`chancy_workers.last_seen` is rewritten 60 s into the past). Here the new owner is
still running when the stale completion arrives.

Why a bug, not a design: chancy 0.25.1 has no fencing token; its worker writes every
job update `WHERE id = %(id)s` and nothing else (`chancy/worker.py`,
`Worker._maintain_updates`, lines 503-519), so a worker Recovery took the job from
still marks it succeeded, under the worker that holds it now. 0.26.0 fixed exactly
this with a per-fetch `claim_id` that `Worker.flush` matches, and says so in
`chancy/plugins/recovery.py` (the `Recovery` docstring): "Recovery invalidates the old
execution's claim [...] Late updates from the old claim are discarded even if it
keeps running."
"""

import sys
from typing import Any

from _stale_worker import main


def judge(seen: dict[str, Any]) -> tuple[bool, str]:
    running, late = seen.get("b_running"), seen.get("after_a")
    if running is None or late is None:
        return False, "the scenario did not get as far as the late completion (see above)"
    if running["taken_by"] != "worker-b" or running["state"] != "running":
        holder = running["taken_by"]
        return False, f"worker B did not hold the job when A's result came ({holder} did)"
    if late["state"] != "succeeded":
        return False, "worker A's late completion was discarded while worker B held the job"
    return True, (
        "while worker B held the recovered job and was still running it, the execution "
        "Recovery had taken it from (worker A) completed it: chancy 0.25.1 writes the "
        "stale worker's update by job id, with no claim to check"
    )


if __name__ == "__main__":
    sys.exit(main(judge, b_waits=True))
