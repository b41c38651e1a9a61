"""owner-progress, pgqueuer 1.6: replayed; pgqueuer itself never refuses the owner.

Replays matrix/results/counterexamples/pgqueuer-1.6/owner-progress.txt (w0 claims and
stalls, w1 re-picks the job, w0's late failure re-queues it, then w1's heartbeat is
refused) with pgqueuer's own queue managers (see `_stale_manager.py`; time: pgqueuer's
own `pgqueuer.heartbeat` column is rewritten into the past).

The machine's "refused" is the adapter's reading (`heartbeat()` answers whether the row
is still picked under the claim's queue manager); pgqueuer's `Queries.update_heartbeat`
(`UPDATE ... SET heartbeat = NOW() WHERE id = ANY($1)`) answers nothing and updates the
row whoever holds it. So this script expects NOT REPRODUCED: what it shows is the
fencing violation (the owner's job taken by a stale retry), not a refusal pgqueuer
gives.
"""

import sys
from typing import Any

from _stale_manager import main


def judge(seen: dict[str, Any]) -> tuple[bool, str]:
    beat = seen.get("beat 10")
    if beat is None or beat["row"] is None:
        return False, "the scenario did not get as far as B's heartbeat (see above)"
    if beat["row"]["silent_s"] > 1:
        return True, "pgqueuer refused the current owner's heartbeat"
    return False, (
        "pgqueuer accepted manager B's heartbeat (update_heartbeat moved the row's "
        f"heartbeat; the row shows status={beat['row']['status']}, queue manager "
        f"{beat['row']['qm']}): the refusal is the adapter's reading that B no longer "
        "holds the job, which manager A's stale retry took from it (see fencing)"
    )


if __name__ == "__main__":
    sys.exit(main(judge, [("raise", "1"), ("beat", "10")]))
