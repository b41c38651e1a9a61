"""graphile-worker 0.18.0 as its worker pool drives it, for the witnesses beside this file.

Every statement is the package's own, unmodified: `leasecheck/adapters/npm/graphile_worker.mjs`
imports the installed package and records what its `migrate()`, `batchGetJobs`,
`batchCompleteJobs`, `batchFailJobs` and `resetLockedAt` send (dist/migrate.js,
dist/sql/*.js); jobs are added with the public `add_job` SQL function. Nothing is mapped:
the lock timeout is graphile-worker's 4 hours and the retry back-off its own. Time is
moved by rewriting graphile-worker's own `locked_at` 4 hours and 1 second into the past,
and the witness says so when it does.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402

from leasecheck.adapters import _node  # noqa: E402
from matrix import npm  # noqa: E402

PIN = "graphile-worker@0.18.0"


def _attempt(job: dict[str, Any]) -> str:
    return f"job {job['id']}, attempt {job['attempts']}"


def _modules() -> Path:
    if not (os.environ.get("LEASECHECK_NPM_DIR") and os.environ.get("LEASECHECK_NPM_PIN")):
        root = REPO / ".leasecheck" / "npm"
        npm.ensure(PIN, root)
        os.environ["LEASECHECK_NPM_DIR"], os.environ["LEASECHECK_NPM_PIN"] = str(root), PIN
    return _node.node_modules("graphile-worker")


class Graphile:
    """One database with graphile-worker 0.18.0 installed by its own migrate()."""

    def __init__(self, dsn: str) -> None:
        self.sql = _node.produce("graphile_worker.mjs", _modules())
        assert self.sql["version"] == "0.18.0", self.sql["version"]
        self.conn = psycopg.connect(dsn, autocommit=True)
        _node.replay(self.conn, [_node.Statement.of(s) for s in self.sql["install"]])
        for stmt in self.sql["tasks"]:
            rows = _node.run(self.conn, stmt["text"], stmt["values"])
        self.task_ids = [int(r[0]) for r in rows.fetchall()]
        print(
            "installed graphile-worker 0.18.0 with its own migrate(); task 'leasecheck' registered"
        )

    def add_job(self) -> int:
        row = self.conn.execute(
            "select id from graphile_worker.add_job('leasecheck', '{}')"
        ).fetchone()
        assert row is not None
        print(f"add_job('leasecheck') -> job {row[0]}")
        return int(row[0])

    def get_job(self, pool: str) -> dict[str, Any] | None:
        cursor = _node.run(self.conn, self.sql["get_job"]["text"], (pool, self.task_ids))
        row = cursor.fetchone()
        names = [c.name for c in cursor.description or ()]
        job = dict(zip(names, row, strict=True)) if row else None
        shown = f"job {job['id']}, attempts {job['attempts']}" if job else "nothing"
        print(f"{pool}: batchGetJobs -> {shown}")
        return job

    def complete(self, pool: str, job: dict[str, Any]) -> int:
        done = _node.run(self.conn, self.sql["complete_job"]["text"], (job["id"],)).rowcount
        print(f"{pool}: batchCompleteJobs({_attempt(job)}) -> {done} row deleted")
        return done

    def fail(self, pool: str, job: dict[str, Any], message: str) -> int:
        spec = json.dumps([{"jobId": str(job["id"]), "message": message}])
        done = _node.run(self.conn, self.sql["fail_job"]["text"], (pool, spec)).rowcount
        print(f"{pool}: batchFailJobs({_attempt(job)}) -> {done} row updated")
        return done

    def age_locks(self) -> None:
        self.conn.execute(
            "update graphile_worker._private_jobs"
            " set locked_at = locked_at - interval '4 hours 1 second' where locked_at is not null"
        )
        print("time: rewrote graphile-worker's own locked_at 4 hours 1 second into the past")

    def reset_locked_at(self) -> None:
        _node.run(self.conn, self.sql["reset_locked_at"]["text"])
        print("resetLockedAt (the pool's periodic sweep, 4-hour timeout as shipped)")

    def row(self, job_id: int) -> dict[str, Any] | None:
        cursor = self.conn.execute(
            "select id, attempts, locked_by, locked_at is not null as locked, last_error"
            " from graphile_worker._private_jobs where id = %s",
            [job_id],
        )
        row = cursor.fetchone()
        names = [c.name for c in cursor.description or ()]
        found = dict(zip(names, row, strict=True)) if row else None
        print(f"job {job_id} row: {found if found else 'gone (deleted)'}")
        return found
