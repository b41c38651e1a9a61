"""single-completion, chancy 0.25.1: a recovered execution's late completion is written too.

Replays matrix/results/counterexamples/chancy-0.25.1/single-completion.txt (worker w0
claims, goes silent past the lease, the sweeper's Recovery puts the job back, w1
fetches and completes it, then w0's late completion is accepted as well) with chancy's
own workers and Recovery (see `_stale_worker.py`; the rule program
`single-completion.program.json` beside it shows the same in 7 machine steps; time: chancy's own
`chancy_workers.last_seen` is rewritten 60 s into the past).

Why a bug, not a design: chancy 0.25.1's worker writes every job update `WHERE id =
%(id)s` and nothing else (`chancy/worker.py`, `Worker._maintain_updates`, lines
503-519), so the execution Recovery took the job from overwrites the result of the
execution that owns it now. The next release fixed exactly this: 0.26.0 adds a
per-fetch `claim_id`, matches updates `AND claim_id IS NOT DISTINCT FROM` it
(`Worker.flush`) and documents the intent in `chancy/plugins/recovery.py` (the
`Recovery` docstring): "Recovery invalidates the old execution's claim [...] Late
updates from the old claim are discarded even if it keeps running." The same script
in chancy 0.26.0's venv prints NOT REPRODUCED.
"""

import sys
from typing import Any

from _stale_worker import main, shown


def judge(seen: dict[str, Any]) -> tuple[bool, str]:
    b, a = seen.get("after_b"), seen.get("after_a")
    if b is None or a is None:
        return False, "the scenario did not get as far as both completions (see above)"
    if b["state"] != "succeeded":
        return False, f"worker B's completion was not written ({shown(b)})"
    if a["completed_at"] == b["completed_at"]:
        return False, "worker A's late completion was discarded; B's result stands"
    return True, (
        "after Recovery handed the job to worker B and B's completion was written, the "
        "recovered execution on worker A completed it a second time (completed_at "
        "overwritten): chancy 0.25.1 updates jobs by id alone"
    )


if __name__ == "__main__":
    sys.exit(main(judge, b_waits=False))
