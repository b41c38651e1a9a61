"""effect-outside — fenced completion, but the effect commits before the fence is checked.

Source: a common refactor that "sends the receipt first, then marks the job done".
A stale worker's completion is rejected, yet its effect is already committed.
Caught by: atomic-rejection (and single-completion once the owner completes too).
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim, Effect


class EffectOutside(ReferenceQueue):
    name = "effect-outside"
    expected = ("atomic-rejection", "single-completion")

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            effect(conn)
        return super().complete(conn, claim, lambda _conn: None)
