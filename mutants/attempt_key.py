"""attempt-key — the idempotency key is derived from the attempt, not the job.

Source: keys built from the claim token "because it is unique"; the receiver then
sees a fresh key per attempt and cannot drop the duplicate.
Caught by: unique-effects.
"""

from __future__ import annotations

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim


class AttemptKey(ReferenceQueue):
    name = "attempt-key"
    expected = ("unique-effects",)

    def effect_key(self, claim: Claim) -> str:
        return f"job-{claim.job_id}-attempt-{claim.token}"
