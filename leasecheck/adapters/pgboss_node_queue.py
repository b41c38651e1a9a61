"""pg-boss 12.38.1 (npm) on its own Node.js client: its public API over its own pg pool.

The mapping onto the contract is `pgboss_queue`'s (read its docstring: claim, fencing,
heartbeats, supervisor, cap, state). What differs is who sends a worker's statements:
not the harness, replaying what pg-boss's builders return, but pg-boss itself. Each of
the harness's sessions gets a `PgBoss` instance of its own, in one Node.js process that
hosts them all (`npm/pgboss_client.mjs`, through `node_client`); each instance opens its
own node-postgres pool on the DSN the harness hands it (`contract.Clients`). A claim
is `boss.fetch()`; a heartbeat, completion and failure are `boss.touch()`,
`boss.complete()` and `boss.fail()` with the fetched job (`{ id, retryCount }`), which
pg-boss fences to the fetched attempt, as `work()` passes them; the sweep is
`boss.supervise()`. pg-boss's
own code decides what to send for each: its queue cache, its settle path, its
supervisor's passes and locks. Each answers with pg-boss's `affected` count.

Not run: the `work()` loop itself, whose polling and heartbeat timers would send between
the harness's steps; the harness makes its calls instead, in the order the loop makes
them. The instance runs on a clock that never fires (pg-boss's `clock` option) and is
started with `migrate`, `supervise` and `schedule` off: the schema is installed once,
on the harness's connection, by `pgboss_queue` (with its clock hook: `job_now()` reads
the harness's time). `install`, `reset`, `enqueue` and `state` stay there too, as the
contract says.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from leasecheck.adapters import _node
from leasecheck.adapters.node_client import NodeClient, NodeHost
from leasecheck.adapters.pgboss_queue import PACKAGE, PgBossClaim, PgBossQueue
from leasecheck.stateful.contract import Effect


def _jobs(claim: PgBossClaim) -> list[dict[str, Any]]:
    """The fetched job as `work()` hands it back: its id and the retryCount it was fetched at."""
    return [{"id": claim.job_id, "retryCount": claim.token}]


class PgBossNodeQueue(PgBossQueue):
    """pg-boss's public fetch, touch, complete, fail and supervise, run by pg-boss in Node."""

    def __init__(self, max_attempts: int = 3) -> None:
        super().__init__(max_attempts)
        self.name = f"{self.name}-node"
        self._modules = _node.node_modules(PACKAGE)
        self._host: NodeHost | None = None

    def connect(self, name: str, dsn: str) -> NodeClient:
        if self._host is None or self._host.process.poll() is not None:
            self._host = NodeHost("pgboss_client.mjs", self._modules, self._queue)
        return self._host.open(dsn)

    def disconnect(self, client: NodeClient) -> None:
        client.close()

    def claim(self, client: Any, worker: str, lease: timedelta) -> PgBossClaim | None:
        fetched = client.call("fetch", batchSize=1)
        if not fetched:
            return None
        job = fetched[0]
        return PgBossClaim(str(job["id"]), int(job["retryCount"]), worker)

    def heartbeat(self, client: Any, claim: PgBossClaim, lease: timedelta) -> bool:
        return int(client.call("touch", jobs=_jobs(claim))) == 1

    def complete(self, client: Any, claim: PgBossClaim, effect: Effect) -> bool:
        """Settle the job as `work()` does after its handler (the harness's effect) returned."""
        return int(client.call("complete", jobs=_jobs(claim))) == 1

    def fail(self, client: Any, claim: PgBossClaim, error: str) -> bool:
        return int(client.call("fail", jobs=_jobs(claim), data={"message": error})) == 1

    def maintain(self, client: Any) -> None:
        """One pass of pg-boss's supervisor for the queue, as its timer runs it."""
        client.call("supervise")


Queue = PgBossNodeQueue
