"""Issue 46's batch: plain bugs with a short counterexample that the `ci` profile missed.

Two queues of their own design, written from the README (not from the reference or the
mutants): `TaskTable`, one `tasks` table leased in batches, and `WorkLeases`, work items
with their leases in a table of their own. Each subclass plants one bug; its docstring
says what the user wrote and why it is wrong, and `witnesses.WITNESSES` holds, for each,
a short program of the machine's rules that breaks a property on it and none on its
clean queue. `python -m bench.ci_margin --corpus NAME` counts the `ci` shards that
kill each.
"""

from __future__ import annotations

from bench.corpus.short_programs.leases import CountAfterCommit, UnlockedLeaseRow, WorkLeases
from bench.corpus.short_programs.tasks import (
    BatchAnyAny,
    DoneThenEffect,
    ExtendFromLeaseEnd,
    HeartbeatRevives,
    RetryAtCap,
    TaskTable,
)

__all__ = [
    "BatchAnyAny",
    "CountAfterCommit",
    "DoneThenEffect",
    "ExtendFromLeaseEnd",
    "HeartbeatRevives",
    "RetryAtCap",
    "TaskTable",
    "UnlockedLeaseRow",
    "WorkLeases",
]
