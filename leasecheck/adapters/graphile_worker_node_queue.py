"""graphile-worker 0.18 (npm) on its own Node.js client: its worker pool's calls, its pg pool.

The mapping onto the contract is `graphile_worker_queue`'s (read its docstring: claim,
token, no heartbeats, the sweeper, cap, state, and the one adaptation: the 4-hour lock is
the harness's 30 s lease). What differs is who sends a worker's statements: graphile-
worker itself. Each of the harness's sessions gets a client of its own in one Node.js
process that hosts them all (`npm/graphile_worker_client.mjs`, through `node_client`): a
pg pool on the DSN the harness hands it (`contract.Clients`) and the options graphile-
worker compiles from its preset (`processSharedOptions`: prepared statements on, the
database's time). A claim, completion and failure are the functions its worker pool
calls, `batchGetJobs`, `batchCompleteJobs` and `batchFailJobs`, with the pool's id
(`leasecheck-pool-<worker>`); the sweep is `resetLockedAt`. Its own code decides what to
send: the task-identifier lookup it caches, the named prepared statements, the queue
variants, the retries of its `withPgClient`. Completion and failure answer the row count
of the statement that settled the job, read off its client.

Not run: the worker pool's loop (its polling timer, LISTEN/NOTIFY, the periodic sweep),
which would send between the harness's steps; the harness makes the calls it makes, in
its order. 0.13 is not hosted (its worker runs the job inside `makeNewWorker`'s own
loop); its column stays on the harness's connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from leasecheck.adapters import _node
from leasecheck.adapters.graphile_worker_queue import (
    LEASE,
    PACKAGE,
    GraphileClaim,
    GraphileWorkerQueue,
)
from leasecheck.adapters.node_client import NodeClient, NodeHost
from leasecheck.stateful.contract import Effect


@dataclass(frozen=True)
class HeldJob(GraphileClaim):
    """A claim, with the job as the worker holds it since (what it completes or fails)."""

    job: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


class GraphileWorkerNodeQueue(GraphileWorkerQueue):
    """graphile-worker 0.18's worker pool calls, run by graphile-worker in Node.js."""

    def __init__(self, max_attempts: int = 3, lock_timeout: timedelta = LEASE) -> None:
        super().__init__(max_attempts, lock_timeout)
        if self._old:
            raise _node.NodeError(f"graphile-worker {self.version}: only 0.18 runs on its client")
        self.name = f"{self.name}-node"
        self._modules = _node.node_modules(PACKAGE)
        self._host: NodeHost | None = None

    def connect(self, name: str, dsn: str) -> NodeClient:
        if self._host is None or self._host.process.poll() is not None:
            seconds = str(int(self._lock_timeout.total_seconds()))
            self._host = NodeHost("graphile_worker_client.mjs", self._modules, seconds)
        return self._host.open(dsn)

    def disconnect(self, client: NodeClient) -> None:
        client.close()

    def claim(self, client: Any, worker: str, lease: timedelta) -> HeldJob | None:
        locked_by = f"leasecheck-pool-{worker}"
        jobs = client.call("get", poolId=locked_by)
        if not jobs:
            return None
        job = jobs[0]
        return HeldJob(int(job["id"]), int(job["attempts"]), worker, locked_by, job)

    def complete(self, client: Any, claim: HeldJob, effect: Effect) -> bool:  # type: ignore[override]
        """The worker's completion; the task (the harness's effect) ran before it."""
        return int(client.call("complete", poolId=claim.locked_by, job=claim.job)) == 1

    def fail(self, client: Any, claim: HeldJob, error: str) -> bool:  # type: ignore[override]
        rows = client.call("fail", poolId=claim.locked_by, job=claim.job, message=error)
        return int(rows) == 1

    def _reset_locked_at(self, client: Any) -> None:
        """0.18's sweeper, `resetLockedAt`, with the lock timeout for its 4 hours."""
        client.call("sweep")


Queue = GraphileWorkerNodeQueue
