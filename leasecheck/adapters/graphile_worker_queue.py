"""graphile-worker 0.13.0 / 0.18.0 (npm) through the contract: its own shipped SQL.

No statement here is typed by hand from the library: `npm/graphile_worker.mjs` imports the
installed package and records what its own code sends (see `_node`). 0.13: `migrate()`
(dist/migrate.js, running sql/000001-000010.sql) and the worker's calls of the installed
`get_job`, `complete_job` and `fail_job` functions (dist/worker.js, `makeNewWorker`).
0.18: `migrate()` (dist/migrate.js with dist/generated/sql.js) and the query builders the
worker pool uses: `batchGetJobs` (dist/sql/getJobs.js), `batchCompleteJobs`
(dist/sql/completeJobs.js), `batchFailJobs` (dist/sql/failJobs.js) and the sweeper
`resetLockedAt` (dist/sql/resetLockedAt.js). Only the job's enqueue is written here, as a
call of the public `add_job` SQL function (README, "Adding jobs through SQL").

How graphile-worker maps onto the contract:

- Claim: the worker's get_job statement picks the first due, unlocked job with
  `attempts < max_attempts` (`FOR UPDATE SKIP LOCKED`), adds 1 to `attempts` and sets
  `locked_by`/`locked_at = now()`. The token is `attempts` (strictly increasing).
- Heartbeats: none. graphile-worker has no per-job lock renewal (`heartbeats = False`).
- When a lease runs out: the lock is good for 4 hours. 0.13 re-offers a job whose
  `locked_at` is older than get_job's `job_expiry` (default `interval '4 hours'`); 0.18
  re-offers nothing by itself: its `resetLockedAt` sweep (dist/main.js, run at startup and
  every few minutes) unlocks jobs locked more than 4 hours ago. That sweep is `maintain()`,
  and since it revokes an expired lock whether or not anyone wants the job (a late
  `fail` is then refused: it matches `locked_by`), 0.18 declares `revokes_expired`.
- Completion: the task runs first, outside any transaction of the queue's, then
  `complete_job` deletes the row by id (0.13: `complete_job(worker_id, job_id)`; 0.18:
  `delete from _private_jobs where id = $1`). Neither checks who holds the job, so a
  stale worker's completion deletes a job another worker is running. Effects are the
  task's, not the completion's: `transactional_effects = False`, and `complete()` never
  calls `effect`. It answers whether the library's statement deleted the row.
- Failure: `fail_job` reschedules the job (`last_error`, `run_at` = now +
  `exp(least(attempts, 10))` seconds, the shipped back-off, kept), unlocking it only
  `where id = job_id and locked_by = worker_id` (0.18: the pool's id). At `attempts >=
  max_attempts` it is never offered again: graphile-worker's "permanently failed".
- State (`state()`): no row is `done`; a locked row is `running`, except one whose lock
  has expired with its attempts used up, which graphile-worker will never hand out again
  (README "What if something goes wrong?": an expired lock means the job is free) and
  counts as `failed`; an unlocked row is `failed` at its cap, else `queued`.
- Held transactions: none. The worker runs each statement on a pool client of its own
  (`held_transactions = False`).
- Time: every statement reads `now()` (searched on the harness's path, so simulated);
  none says `current_timestamp`, pins a function's search_path or passes a Node-side
  time (the `useNodeTime` option is off by default, and off here).

Adaptations, each with its reason:

- The 4-hour lock is the harness's 30 s lease: 0.13's claim passes its own
  `job_expiry` parameter (`job_expiry := $5::interval`, the lease), and 0.18's sweep
  compares with the lease instead of its literal `interval '4 hours'`. A lease is the
  harness's unit of "this worker is presumed dead"; 4 hours is graphile-worker's.
- Worker ids: 0.13 names every worker (one job at a time) with a random
  `worker-<hex>`; a harness worker that holds several jobs is several of those, so each
  claim gets a fresh id `leasecheck-<worker>-<hex>`. 0.18 locks with the worker pool's
  id (one per process, shared by its concurrent jobs): here `leasecheck-pool-<worker>`.
- `SELECT FROM complete_job(...)` / `fail_job(...)` (0.13) read `SELECT id FROM ...` so
  the adapter can tell whether the function's row came back; graphile-worker discards it.
- `max_attempts` is 3 (graphile-worker's default is 25), set through add_job.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection

from leasecheck.adapters import _node
from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Effect
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("graphile_worker.sql"))
PACKAGE = "graphile-worker"
TASK = "leasecheck"
LEASE = timedelta(seconds=30)
"""The harness's lease (leasecheck.stateful.units.LEASE): graphile-worker's 4-hour lock."""


@dataclass(frozen=True)
class GraphileClaim:
    """A claim: the job, its attempt number (the token), the harness worker and the lock holder."""

    job_id: int
    token: int
    worker: str
    locked_by: str

    def __repr__(self) -> str:
        return f"job {self.job_id} attempt {self.token} locked by {self.locked_by}"


@dataclass(frozen=True)
class _Sql:
    """The package's statements, adapted as the module docstring says."""

    version: str
    install: list[_node.Statement]
    claim: _node.Statement
    complete: _node.Statement
    fail: _node.Statement
    tasks: list[_node.Statement]
    sweep: _node.Statement | None


def _sql() -> _Sql:
    produced = _node.produce("graphile_worker.mjs", _node.node_modules(PACKAGE))
    version = str(produced["version"])
    install = [_node.Statement.of(s) for s in produced["install"]]
    claim = _node.Statement.of(produced["get_job"])
    complete = _node.Statement.of(produced["complete_job"])
    fail = _node.Statement.of(produced["fail_job"])
    if version.startswith("0.13."):
        claim = claim.replace(
            "$2, forbidden_flags", "$2, job_expiry := $5::interval, forbidden_flags"
        )
        complete = complete.replace("SELECT FROM", "SELECT id FROM")
        fail = fail.replace("SELECT FROM", "SELECT id FROM")
        return _Sql(version, install, claim, complete, fail, [], None)
    sweep = _node.Statement.of(produced["reset_locked_at"]).replace(
        "interval '4 hours'", "$1::interval", 2
    )
    tasks = [_node.Statement.of(s) for s in produced["tasks"]]
    return _Sql(version, install, claim, complete, fail, tasks, sweep)


class GraphileWorkerQueue:
    """graphile-worker's worker protocol, one contract call at a time, in its own SQL."""

    ordered_tokens = True
    heartbeats = False
    held_transactions = False
    transactional_effects = False

    def __init__(self, max_attempts: int = 3, lock_timeout: timedelta = LEASE) -> None:
        self.max_attempts: int | None = max_attempts
        self._cap = max_attempts
        self._lock_timeout = lock_timeout
        self._sql = _sql()
        self.version = self._sql.version
        # No dots: the machine names failure files QUEUE-PROPERTY-HASH with Path.with_suffix,
        # which would take ".0-property-hash" of "graphile-worker-0.18.0-..." for a suffix.
        self.name = f"graphile-worker-{self.version.replace('.', '_')}"
        self._old = self.version.startswith("0.13.")
        self.revokes_expired = not self._old
        if not self._old:
            self.maintain = self._reset_locked_at

    def install(self, conn: Connection[Any]) -> None:
        _node.replay(conn, self._sql.install)
        with conn.transaction():
            for stmt in self._sql.tasks:
                _node.run(conn, stmt.text, stmt.values)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(QUERIES["reset_0_13" if self._old else "reset_0_18"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        row = conn.execute(
            QUERIES["enqueue"].text, {"payload": json.dumps(payload), "max_attempts": self._cap}
        ).fetchone()
        assert row is not None
        return int(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> GraphileClaim | None:
        if self._old:
            locked_by = f"leasecheck-{worker}-{uuid.uuid4().hex[:12]}"
            values: tuple[Any, ...] = (locked_by, [TASK], None, None, lease)
        else:
            locked_by = f"leasecheck-pool-{worker}"
            ids = _node.run(conn, self._sql.tasks[1].text, self._sql.tasks[1].values).fetchall()
            values = (locked_by, [int(r[0]) for r in ids])
        cursor = _node.run(conn, self._sql.claim.text, values)
        row = cursor.fetchone()
        names = [c.name for c in cursor.description or ()]
        if row is None or row[names.index("id")] is None:
            return None
        job = dict(zip(names, row, strict=True))
        return GraphileClaim(int(job["id"]), int(job["attempts"]), worker, locked_by)

    def heartbeat(self, conn: Connection[Any], claim: GraphileClaim, lease: timedelta) -> bool:
        return False  # graphile-worker has no lock renewal (heartbeats = False)

    def complete(self, conn: Connection[Any], claim: GraphileClaim, effect: Effect) -> bool:
        """Run the worker's completion; the task (the harness's effect) ran before it."""
        if self._old:
            values: tuple[Any, ...] = (claim.locked_by, claim.job_id)
            row = _node.run(conn, self._sql.complete.text, values).fetchone()
            return row is not None and row[0] is not None
        return _node.run(conn, self._sql.complete.text, (claim.job_id,)).rowcount == 1

    def fail(self, conn: Connection[Any], claim: GraphileClaim, error: str) -> bool:
        if self._old:
            values: tuple[Any, ...] = (claim.locked_by, claim.job_id, error)
            row = _node.run(conn, self._sql.fail.text, values).fetchone()
            return row is not None and row[0] is not None
        spec = json.dumps([{"jobId": str(claim.job_id), "message": error}])
        return _node.run(conn, self._sql.fail.text, (claim.locked_by, spec)).rowcount == 1

    def effect_key(self, claim: GraphileClaim) -> str:
        return f"graphile-worker-job-{claim.job_id}"

    def state(self, conn: Connection[Any], job_id: int) -> str:
        query = QUERIES["state_0_13" if self._old else "state_0_18"].text
        row = conn.execute(query, {"id": job_id, "lock_timeout": self._lock_timeout}).fetchone()
        if row is None:
            return DONE
        locked, expired, exhausted = row
        if locked and not (expired and exhausted):
            return RUNNING
        return FAILED if exhausted else QUEUED

    def _reset_locked_at(self, conn: Connection[Any]) -> None:
        """0.18's sweeper: unlock jobs locked longer than the lock timeout."""
        assert self._sql.sweep is not None
        _node.run(conn, self._sql.sweep.text, (self._lock_timeout,))


Queue = GraphileWorkerQueue
