"""from-subquery-claim — the claim picks its job in a subquery in FROM, not a CTE.

Source: the shape many tutorials and queues write, `update jobs set ... from
(select id ... limit 1 for update skip locked) as next where jobs.id = next.id`, fixed with
a CTE in relay-rs #22 and postmangovsg #276; PostgreSQL's answer to BUG #15715 is that only
a WITH query is guaranteed to run once, so this is the planner's right, not a bug. Once the
statistics say the table is tiny (an ANALYZE, or autovacuum, while it held a row or two)
the planner joins it as a nested loop with `jobs` outside and scans the subquery again for
every row; each rescan finds the row it locked already updated by this statement and locks
the next: one call marks every claimable job running and hands out one (measured on
PostgreSQL 18.6: three jobs, `rows=1 loops=3` under the Limit). The reference's CTE is
scanned once. Found by the `replan` move on a test queue written as a user would
(tests/fidelity_queues.py, before its claim was a CTE), like in-subquery-claim.
Caught by: no-hidden-claims (the jobs taken but not handed out), or exclusive-lease,
late-owner or no-lost-jobs (a hidden job later given up at its cap, never handed out).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import claim_with


class FromSubqueryClaim(ReferenceQueue):
    name = "from-subquery-claim"
    expected = ("no-hidden-claims", "exclusive-lease", "late-owner", "no-lost-jobs")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return claim_with("claim_from_subquery", conn, worker, lease)
