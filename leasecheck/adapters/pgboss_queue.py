"""pg-boss 12.38.1 (npm) through the contract: statements built by its own plans.js.

No statement here is typed by hand from the library: `npm/pgboss.mjs` imports the
installed package and prints what its builders return for the arguments its own code
passes (see `_node`): the schema from the public `getConstructionPlans` (dist/index.js,
as `Contractor.create` installs it), `createQueue`, `insertJobs` (manager.js `#createJob`,
i.e. `send()`), `fetchNextJob` (manager.js `#fetch`), `completeJobs`, `failJobsById` and
`touchJobs` with the fetched jobs (fenced, as `work()` settles), and the supervisor's
`failJobsByTimeout` / `failJobsByHeartbeat` (boss.js `#supervisePass`). The adapter passes
the values manager.js would (`[name, ids, output, attemptPairs(ids, retryCounts)]`, the
pairs being `id:retry_count`, plans.js `attemptPairs`).

How pg-boss maps onto the contract:

- Claim: `fetchNextJob` takes the first `created`/`retry` job due by `start_after`
  (`FOR UPDATE OF j SKIP LOCKED`), sets it `active` with `started_on = heartbeat_on =
  job_now()`, and adds 1 to `retry_count` when it had been started before. The token
  is the fetched `retryCount` (strictly increasing per job). Since 12.38.1 `#fetch`
  counts a fetched job's active group (plans.js `getActiveGroupCounts`) and gives back
  jobs over `groupConcurrency`; it does so only for jobs with a `group_id` and that
  option set, and these have neither, so the claim is the one statement.
- Fencing: every settle and heartbeat from `work()` passes the fetched jobs, so it is
  fenced (plans.js `attemptFence`, issue #925): `state = 'active' AND id:retry_count`
  is the fetched attempt's.
- Heartbeats: per job. `touch()` (manager.js, plans.js `touchJobs`, fenced) moves
  `heartbeat_on`; `work()` calls it every `heartbeatSeconds / 2` when the queue (or job)
  has `heartbeatSeconds`. The queue is created with `heartbeatSeconds` = the harness's
  lease (30 s), so `heartbeat()` is `touch()` and answers whether it refreshed the job.
- When a lease runs out: the supervisor (`superviseIntervalSeconds`) fails every
  `active` job whose `heartbeat_on + heartbeat_seconds` has passed, and every one
  active longer than `expire_seconds` (default 15 minutes, kept): back to `retry` while
  `retry_count < retry_limit`, else `failed`. That sweep is `maintain()`; it revokes an
  expired lease whether or not anyone wants the job, by design (`revokes_expired`).
- Completion: `work()` runs the handler, then `complete()` on a pooled connection: the
  effect is the handler's, outside the completion (`transactional_effects = False`;
  `complete()` never calls `effect`). The opt-in `work({ transactional: true })` mode is
  not modelled. `complete()`/`fail()` answer whether pg-boss's statement settled the job
  (its `affected` count).
- Retry cap: `retry_limit` 2 (pg-boss's default): 3 claims (`max_attempts = 3`). Retry
  delay 0 and no back-off are pg-boss's defaults too: a failed job is due at once.
- State (`state()`): `created`/`retry` are `queued`, `active` is `running`, `completed`
  is `done`, `failed` (and `cancelled`, never used here) is `failed`.
- Held transactions: none. `work()` fetches and settles on pooled connections of its
  own (`held_transactions = False`).

Adaptations, each with its reason:

- Time: pg-boss reads its clock through `pgboss.job_now()`, whose shipped body is
  `SELECT pg_catalog.now();`: schema-qualified, so it bypasses the harness's simulated
  `now()` (column defaults also name `pg_catalog.now()`, but every write pg-boss makes
  names `job_now()`). After installing, the adapter replaces the body with `SELECT now();`
  using pg-boss's own `createClockFunction(schema, { replace: true, body })`, the hook its
  `TestClock` uses (plans.js `clockOverrideBody`), so `job_now()` reads the harness's clock.
- The install, `createQueue` and the supervisor's sweeps come wrapped by plans.js
  `transaction()` in `BEGIN; ... COMMIT;`; the adapter runs what is inside in a
  transaction of the harness's connection (`with conn.transaction()`), the advisory lock
  and `SET LOCAL` lines included. The supervisor repeats a sweep while a batch is full
  (1000 jobs): here one batch always suffices.
- `heartbeatSeconds` is the harness's 30 s lease (pg-boss has none by default).
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

QUERIES = load(Path(__file__).with_name("pgboss.sql"))
PACKAGE = "pg-boss"
LEASE = timedelta(seconds=30)
"""The harness's lease (leasecheck.stateful.units.LEASE): the queue's heartbeatSeconds."""
STATES = {
    "created": QUEUED,
    "retry": QUEUED,
    "active": RUNNING,
    "completed": DONE,
    "failed": FAILED,
    "cancelled": FAILED,
}


@dataclass(frozen=True)
class PgBossClaim:
    """A fetched job as `work()` holds it: its id and the retryCount it was fetched at."""

    job_id: str
    token: int
    worker: str

    def __repr__(self) -> str:
        return f"job {self.job_id[:8]} retryCount {self.token}"


def _unwrap(text: str) -> str:
    """Return plans.js `transaction()`'s statements without its own BEGIN and COMMIT."""
    body = text.strip()
    if not (body.startswith("BEGIN;") and body.endswith("COMMIT;")):
        raise _node.NodeError("pg-boss: expected a BEGIN; ... COMMIT; block from plans.js")
    return body.removeprefix("BEGIN;").removesuffix("COMMIT;")


def _in_transaction(conn: Connection[Any], text: str) -> None:
    with conn.transaction():
        _node.run(conn, _unwrap(text))


class PgBossQueue:
    """pg-boss's send, fetch, settle, touch and supervisor, one contract call at a time."""

    ordered_tokens = True
    heartbeats = True
    held_transactions = False
    transactional_effects = False
    revokes_expired = True

    def __init__(self, max_attempts: int = 3, lease: timedelta = LEASE) -> None:
        self.max_attempts: int | None = max_attempts
        options = {"retryLimit": max_attempts - 1, "heartbeatSeconds": int(lease.total_seconds())}
        modules = _node.node_modules(PACKAGE)
        self._sql = _node.produce("pgboss.mjs", modules, json.dumps(options, sort_keys=True))
        self.version = str(self._sql["version"])
        # No dots: failure files are named with Path.with_suffix (see graphile_worker_queue).
        self.name = f"pgboss-{self.version.replace('.', '_')}"
        self._queue = str(self._sql["queue"])
        if self._sql["clock_body"] != "SELECT pg_catalog.now();":
            raise _node.NodeError(f"pg-boss {self.version}: job_now() is not what the adapter read")

    def install(self, conn: Connection[Any]) -> None:
        _in_transaction(conn, self._sql["install"])
        _in_transaction(conn, self._sql["create_queue"])
        with conn.transaction():
            _node.run(conn, self._sql["clock_function"])
            row = conn.execute(QUERIES["table"].text, {"queue": self._queue}).fetchone()
            conn.execute(QUERIES["fresh"].text, {"queue": self._queue})
        if row is None or row[0] != self._sql["table"]:
            raise _node.NodeError(f"pg-boss put the queue in {row}, not {self._sql['table']}")

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(QUERIES["reset"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        row = _node.run(conn, self._sql["send"], [json.dumps([{"data": payload}])]).fetchone()
        assert row is not None
        return str(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> PgBossClaim | None:
        fetch = self._sql["fetch"]
        cursor = _node.run(conn, fetch["text"], fetch["values"])
        row = cursor.fetchone()
        if row is None:
            return None
        names = [c.name for c in cursor.description or ()]
        job = dict(zip(names, row, strict=True))
        return PgBossClaim(str(job["id"]), int(job["retryCount"]), worker)

    def _settled(self, conn: Connection[Any], text: str, values: list[Any]) -> bool:
        row = _node.run(conn, text, values).fetchone()
        return row is not None and int(row[0]) == 1

    def _ids(self, claim: PgBossClaim) -> tuple[list[uuid.UUID], list[str]]:
        return [uuid.UUID(claim.job_id)], [f"{claim.job_id}:{claim.token}"]

    def heartbeat(self, conn: Connection[Any], claim: PgBossClaim, lease: timedelta) -> bool:
        ids, pairs = self._ids(claim)
        return self._settled(conn, self._sql["touch"], [self._queue, ids, pairs])

    def complete(self, conn: Connection[Any], claim: PgBossClaim, effect: Effect) -> bool:
        """Settle the job as `work()` does after its handler (the harness's effect) returned."""
        ids, pairs = self._ids(claim)
        return self._settled(conn, self._sql["complete"], [self._queue, ids, None, pairs])

    def fail(self, conn: Connection[Any], claim: PgBossClaim, error: str) -> bool:
        ids, pairs = self._ids(claim)
        output = json.dumps({"message": error})
        return self._settled(conn, self._sql["fail"], [self._queue, ids, output, pairs])

    def effect_key(self, claim: PgBossClaim) -> str:
        return f"pgboss-job-{claim.job_id}"

    def state(self, conn: Connection[Any], job_id: str) -> str:
        row = conn.execute(QUERIES["state"].text, {"id": job_id}).fetchone()
        if row is None:
            raise _node.NodeError(f"pg-boss has no job {job_id}")
        return STATES[str(row[0])]

    def maintain(self, conn: Connection[Any]) -> None:
        """The supervisor's sweeps: jobs past expire_seconds, then those whose heartbeat is lost."""
        _in_transaction(conn, self._sql["expire_by_timeout"])
        _in_transaction(conn, self._sql["expire_by_heartbeat"])


Queue = PgBossQueue
