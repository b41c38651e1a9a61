"""limbo-at-cap — a lease that runs out on the last attempt leaves the job running forever.

Source: a claim that skips exhausted jobs but nothing that gives them up: no reaper
fails them, so they sit `running` with an expired lease, neither retried nor failed,
and nobody is told. Counting claims, a checker would call such a job finished (it
used every attempt); only the queue's own state shows it is stuck.
Caught by: no-lost-jobs (the queue shows the job running after the drain).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.contract import Claim
from mutants._base import claim_with


class LimboAtCap(ReferenceQueue):
    name = "limbo-at-cap"
    expected = ("no-lost-jobs",)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return claim_with("claim_without_giving_up", conn, worker, lease)
