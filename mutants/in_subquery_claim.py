"""in-subquery-claim — the claim picks its job in `where id in (select ... limit 1 ...)`.

Source: odd-jobs #115 and conductor #369 (fixed in #391): `update ... where id in
(select id ... limit 1 for update skip locked)` reads as a one-job claim. Once the
statistics say the table is tiny (an ANALYZE, or autovacuum, while it held a row or
two) the planner runs it as a nested-loop semi-join with `jobs` outside, runs the
pick again for every row, and each run locks the next job: one call marks several
running and hands out one. The suite's databases never analyze by themselves
(`stateful.engine.stillness`), so only the `replan` move (`stateful.engine.replan`) reaches it.
Caught by: no-hidden-claims (the jobs taken but not handed out), or exclusive-lease, or
late-owner (an expired job taken from under its late owner, whose next call is refused).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import claim_with


class InSubqueryClaim(ReferenceQueue):
    name = "in-subquery-claim"
    expected = ("no-hidden-claims", "exclusive-lease", "late-owner")

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return claim_with("claim_in_subquery", conn, worker, lease)
