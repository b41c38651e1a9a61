"""A corpus of queues written from the README and docs/adapters.md, not from the reference.

Each sub-package is one queue of its own design (schema, SQL style, claim type, id
type); its clean form keeps the contract, and each variant plants one plain bug a
user writes. `QUEUES` lists the clean queues, `VARIANTS` the planted bugs;
`bench.corpus_kills` runs them through `leasecheck check` as a user does.
`short_programs` is a later batch (issue 46): bugs with a counterexample of a few
moves that `ci` missed, each with its witness program (`short_programs.witnesses`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.corpus import visibility_sql

SQL_FILE = "visibility"
"""The queue kept as one `.sql` file: its entries name a variant file, not a class."""


@dataclass(frozen=True)
class Entry:
    """One queue to run: a `module:attr` spec, or the `.sql` queue (clean or a variant)."""

    name: str
    queue: str
    """The clean queue it is (or is a variant of)."""
    bug: str | None
    """The planted bug in a few words; None for the clean queue."""
    spec: str | None = None
    sql_variant: str | None = None

    def target(self, workdir: Path) -> list[str]:
        """Return the `leasecheck check` arguments that name this queue (writing the
        variant's whole `.sql` file into `workdir` when it is one)."""
        if self.spec is not None:
            return [self.spec]
        if self.sql_variant is None:
            return ["--sql", str(visibility_sql.CLEAN)]
        return ["--sql", str(visibility_sql.write_variant(self.sql_variant, workdir))]


def _py(module: str, attr: str, name: str, queue: str, bug: str | None) -> Entry:
    return Entry(name=name, queue=queue, bug=bug, spec=f"bench.corpus.{module}:{attr}")


QUEUES = {
    e.name: e
    for e in (
        _py("locked_jobs", "LockedJobs", "locked-jobs", "locked-jobs", None),
        _py("uuid_tasks", "UuidTasks", "uuid-tasks", "uuid-tasks", None),
        _py("orm_items", "OrmItems", "orm-items", "orm-items", None),
        _py("async_pool", "AsyncPoolQueue", "async-pool", "async-pool", None),
        _py("short_programs", "TaskTable", "task-table", "task-table", None),
        _py("short_programs", "WorkLeases", "work-leases", "work-leases", None),
        Entry(name=SQL_FILE, queue=SQL_FILE, bug=None),
    )
}

_BUGS = [
    ("locked_jobs", "UnfencedHeartbeat", "locked-jobs-unfenced-heartbeat",
     "no fence on heartbeat (id and status only)"),
    ("locked_jobs", "HeartbeatByWorker", "locked-jobs-heartbeat-by-worker",
     "heartbeat fenced on the worker's name"),
    ("locked_jobs", "UnfencedComplete", "locked-jobs-unfenced-complete",
     "no fence on completion (id and status only)"),
    ("locked_jobs", "UnfencedFail", "locked-jobs-unfenced-fail",
     "no fence on fail (id and status only)"),
    ("locked_jobs", "UncappedExpiry", "locked-jobs-uncapped-expiry",
     "no retry cap on the expired path (claim)"),
    ("uuid_tasks", "UnfencedComplete", "uuid-tasks-unfenced-complete",
     "no fence on completion (id and status only)"),
    ("uuid_tasks", "CompleteByWorker", "uuid-tasks-complete-by-worker",
     "completion fenced on the worker's name"),
    ("uuid_tasks", "UncappedExpiry", "uuid-tasks-uncapped-expiry",
     "no retry cap on the expired path (plpgsql claim)"),
    ("orm_items", "CheckThenActComplete", "orm-items-check-then-act-complete",
     "check-then-act completion (plain read, then save by id)"),
    ("orm_items", "CheckThenActFail", "orm-items-check-then-act-fail",
     "check-then-act fail (plain read, then save by id)"),
    ("orm_items", "FencedOnOwner", "orm-items-fenced-on-owner",
     "every write fenced on the worker's name"),
    ("async_pool", "UnfencedHeartbeat", "async-pool-unfenced-heartbeat",
     "no fence on heartbeat (id and status only)"),
    ("async_pool", "UnfencedFail", "async-pool-unfenced-fail",
     "no fence on fail (id and status only)"),
    ("async_pool", "UncappedReaper", "async-pool-uncapped-reaper",
     "no retry cap on the expired path (reaper)"),
]  # fmt: skip

_SHORT_PROGRAMS = [
    ("task-table", "RetryAtCap", "task-table-retry-at-cap",
     "failure on the last try re-queued; the claim takes only tries left"),
    ("task-table", "DoneThenEffect", "task-table-done-then-effect",
     "completion commits done, then runs the effect in a second transaction"),
    ("work-leases", "CountAfterCommit", "work-leases-count-after-commit",
     "claim commits, then a counter update that can time out raises"),
    ("task-table", "HeartbeatRevives", "task-table-heartbeat-revives",
     "heartbeat fenced on the try, not the state, writes active back"),
    ("task-table", "BatchAnyAny", "task-table-batch-any-any",
     "batch completion matches id = any and try = any, not pairwise"),
    ("task-table", "ExtendFromLeaseEnd", "task-table-extend-from-lease-end",
     "heartbeat extends from the old lease end, not from now"),
    ("work-leases", "UnlockedLeaseRow", "work-leases-unlocked-lease-row",
     "claim locks the item row but not its lease row"),
]  # fmt: skip
"""Issue 46's batch, one module for both queues: (clean queue, class, name, bug)."""

VARIANTS = {
    e.name: e
    for e in (
        *(
            _py(module, attr, name, module.replace("_", "-"), bug)
            for module, attr, name, bug in _BUGS
        ),
        *(
            _py("short_programs", attr, name, queue, bug)
            for queue, attr, name, bug in _SHORT_PROGRAMS
        ),
        Entry(
            name="visibility-heartbeat-by-receiver",
            queue=SQL_FILE,
            bug="heartbeat fenced on the worker's name",
            sql_variant="heartbeat-by-receiver",
        ),
        Entry(
            name="visibility-delete-by-id",
            queue=SQL_FILE,
            bug="no fence on completion (id and status only)",
            sql_variant="delete-by-id",
        ),
    )
}
ALL = {**QUEUES, **VARIANTS}
