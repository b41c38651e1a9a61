"""Work items with text ids, written the way ORM code is: read the row, decide in
Python, write it back by primary key.

That is correct when the read locks the row (`select ... for update`, an ORM's
`select_for_update()`) in the transaction that writes it: nobody can claim the item
between the check and the save. The check-then-act variants read with a plain
`get()` instead, so a claim can land between the two statements; the by-owner
variant checks the worker's name instead of the run. Claims are dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from leasecheck.stateful.contract import Effect
from leasecheck.stateful.sqlfile import load

SQL = {name: query.text for name, query in load(Path(__file__).with_name("queries.sql")).items()}


@dataclass(frozen=True)
class Run:
    """One run of one item: `token` is the item's `run` number when it was started."""

    job_id: str
    token: int
    worker: str


class OrmItems:
    """The clean queue: each write reads its row `for update` first, in one transaction."""

    name = "orm-items"
    max_attempts: int | None = 3
    ordered_tokens = True
    read_for_complete = "get_locked"
    read_for_fail = "get_locked"
    fence_on_owner = False

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(SQL["install"])

    def reset(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            for statement in SQL["reset"].split(";"):
                conn.execute(statement)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        params = {"payload": Jsonb(payload), "max_runs": self.max_attempts}
        row = conn.execute(SQL["insert"], params).fetchone()
        assert row is not None, "insert ... returning gives its row"
        return str(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Run | None:
        with conn.transaction():
            while True:
                row = conn.execute(SQL["next_item"]).fetchone()
                if row is None:
                    return None
                item_id, status, run, max_runs = row
                if status == "in_progress" and run >= max_runs:  # its last run's lease ran out
                    self._save_status(conn, item_id, "gave_up", "lease expired on the last run")
                    continue
                params = {
                    "id": item_id,
                    "owner": worker,
                    "run": run + 1,
                    "lease_seconds": lease.total_seconds(),
                }
                conn.execute(SQL["save_started"], params)
                return Run(job_id=item_id, token=run + 1, worker=worker)

    def _owns(self, row: Any, run: Run) -> bool:
        """Whether the row read back still belongs to this run."""
        if row is None or row[0] != "in_progress":
            return False
        return bool(row[1] == run.worker) if self.fence_on_owner else bool(row[2] == run.token)

    def heartbeat(self, conn: Connection[Any], claim: Run, lease: timedelta) -> bool:
        with conn.transaction():
            row = conn.execute(SQL["get_locked"], {"id": claim.job_id}).fetchone()
            if not self._owns(row, claim):
                return False
            params = {"id": claim.job_id, "lease_seconds": lease.total_seconds()}
            conn.execute(SQL["save_heartbeat"], params)
            return True

    def complete(self, conn: Connection[Any], claim: Run, effect: Effect) -> bool:
        with conn.transaction():
            row = conn.execute(SQL[self.read_for_complete], {"id": claim.job_id}).fetchone()
            if not self._owns(row, claim):
                return False
            self._save_status(conn, claim.job_id, "finished", None)
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: Run, error: str) -> bool:
        with conn.transaction():
            row = conn.execute(SQL[self.read_for_fail], {"id": claim.job_id}).fetchone()
            if not self._owns(row, claim):
                return False
            assert self.max_attempts is not None
            status = "gave_up" if claim.token >= self.max_attempts else "new"
            self._save_status(conn, claim.job_id, status, error)
            return True

    def _save_status(
        self, conn: Connection[Any], item_id: str, status: str, error: str | None
    ) -> None:
        conn.execute(SQL["save_status"], {"id": item_id, "status": status, "error": error})

    def effect_key(self, claim: Run) -> str:
        return f"work-item/{claim.job_id}"

    def state(self, conn: Connection[Any], job_id: str) -> str:
        row = conn.execute(SQL["status"], {"id": job_id}).fetchone()
        assert row is not None, f"item {job_id} was saved"
        return str(row[0])


class CheckThenActComplete(OrmItems):
    """Bug: the completion reads its item with a plain get() (no lock), then saves it
    by id: a claim between the two is overwritten."""

    name = "orm-items-check-then-act-complete"
    read_for_complete = "get"


class CheckThenActFail(OrmItems):
    """Bug: the failure report reads its item with a plain get(), then saves it by id."""

    name = "orm-items-check-then-act-fail"
    read_for_fail = "get"


class FencedOnOwner(OrmItems):
    """Bug: every write checks that `owner` is this worker's name, not that the run is
    this claim's."""

    name = "orm-items-fenced-on-owner"
    fence_on_owner = True
