"""graphile-worker 0.13.0 as its workers drive it, for the witnesses beside this file.

Every statement is the package's own, unmodified: `leasecheck/adapters/npm/graphile_worker.mjs`
imports the installed package and records what its `migrate()` (dist/migrate.js, running
sql/000001-000010.sql) and its worker (dist/worker.js, `makeNewWorker`) send: calls of the
installed `get_job`, `complete_job` and `fail_job` functions. Jobs are added with the
public `add_job` SQL function. Nothing is mapped: `get_job` keeps its default
`job_expiry` of 4 hours and `fail_job` its back-off. Time is moved by rewriting
graphile-worker's own `locked_at` 4 hours and 1 second into the past, and the witness
says so when it does. `complete_job`/`fail_job` are called as the worker calls them
(`SELECT FROM ...`); the job's row is read separately to show what they did.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402

from leasecheck.adapters import _node  # noqa: E402
from matrix import npm  # noqa: E402

PIN = "graphile-worker@0.13.0"


def _modules() -> Path:
    if not (os.environ.get("LEASECHECK_NPM_DIR") and os.environ.get("LEASECHECK_NPM_PIN")):
        root = REPO / ".leasecheck" / "npm"
        npm.ensure(PIN, root)
        os.environ["LEASECHECK_NPM_DIR"], os.environ["LEASECHECK_NPM_PIN"] = str(root), PIN
    return _node.node_modules("graphile-worker")


class Graphile:
    """One database with graphile-worker 0.13.0 installed by its own migrate()."""

    def __init__(self, dsn: str) -> None:
        self.sql = _node.produce("graphile_worker.mjs", _modules())
        assert self.sql["version"] == "0.13.0", self.sql["version"]
        self.conn = psycopg.connect(dsn, autocommit=True)
        _node.replay(self.conn, [_node.Statement.of(s) for s in self.sql["install"]])
        print("installed graphile-worker 0.13.0 with its own migrate()")

    def add_job(self) -> int:
        row = self.conn.execute(
            "select id from graphile_worker.add_job('leasecheck', '{}')"
        ).fetchone()
        assert row is not None
        print(f"add_job('leasecheck') -> job {row[0]}")
        return int(row[0])

    def get_job(self, worker: str) -> dict[str, Any] | None:
        values = (worker, ["leasecheck"], None, None)
        cursor = _node.run(self.conn, self.sql["get_job"]["text"], values)
        row = cursor.fetchone()
        names = [c.name for c in cursor.description or ()]
        job = dict(zip(names, row, strict=True)) if row and row[0] is not None else None
        shown = f"job {job['id']}, attempts {job['attempts']}" if job else "nothing"
        print(f"{worker}: get_job -> {shown}")
        return job

    def complete(self, worker: str, job: dict[str, Any]) -> None:
        _node.run(self.conn, self.sql["complete_job"]["text"], (worker, job["id"]))
        print(f"{worker}: complete_job(job {job['id']}, attempt {job['attempts']})")

    def fail(self, worker: str, job: dict[str, Any], message: str) -> None:
        _node.run(self.conn, self.sql["fail_job"]["text"], (worker, job["id"], message))
        print(f"{worker}: fail_job(job {job['id']}, attempt {job['attempts']}, {message!r})")

    def age_locks(self) -> None:
        self.conn.execute(
            "update graphile_worker.jobs"
            " set locked_at = locked_at - interval '4 hours 1 second' where locked_at is not null"
        )
        print("time: rewrote graphile-worker's own locked_at 4 hours 1 second into the past")

    def row(self, job_id: int) -> dict[str, Any] | None:
        cursor = self.conn.execute(
            "select id, attempts, locked_by, locked_at is not null as locked, last_error"
            " from graphile_worker.jobs where id = %s",
            [job_id],
        )
        row = cursor.fetchone()
        names = [c.name for c in cursor.description or ()]
        found = dict(zip(names, row, strict=True)) if row else None
        print(f"job {job_id} row: {found if found else 'gone (deleted)'}")
        return found
