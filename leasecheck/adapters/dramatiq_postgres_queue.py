"""dramatiq-postgres 1.4.0 (with dramatiq 2.2.1) through the contract, on its own pool.

How dramatiq-postgres maps onto the contract (read from dramatiq-postgres 1.4.0's
`broker.py`, `utils.py`, `schema.sql` and README, and dramatiq 2.2.1's `worker.py`,
`broker.py` and `middleware/retries.py`):

- Connections: the library's own. Each of the harness's sessions gets a
  `psycopg_pool.ConnectionPool` made by dramatiq-postgres's `make_pool` (what
  `PostgresBroker(url=...)` makes: opened on demand, checked on checkout) on the DSN the
  harness hands it (`contract.Clients`), and a `PostgresBroker(pool=...)` on that pool.
  Every statement runs where the library sends it, through its own `transaction()`,
  `getconn()` and pool; the harness steps them on the wire. `listen=False`, the README's
  mode for running behind pgbouncer ("workers rely on polling alone"): with LISTEN, a
  thread of the broker's (`Notifier`) would wait on a connection of its own between the
  harness's steps. The NOTIFYs the library's statements send are kept. No result
  backend (`results=False`): the task stores no result.
- A worker is one dramatiq worker process: one broker, whose `worker_id` (a uuid per
  process) is derived here from the machine's worker name, so every call of a worker
  speaks as that process, whichever session's client runs it.
- Claim: what the consumer thread's `PostgresConsumer.__next__` does (broker.py): on its
  consume connection, `maybe_heartbeat` (the worker's row, upserted before the first
  claim "so the reaper never sees a message owned by an unknown worker"), then `claim`:
  `FOR UPDATE SKIP LOCKED` of the oldest due `queued` messages, set `consumed` with this
  `worker_id` (`claim_many` is the same statement with the consumer's prefetch as its
  limit). A consumer that claims is a live process, whose loop beats every
  `heartbeat_interval` (15 s), so the claim beats first (favourable to the library: a
  beat up to 15 s fresher than the loop's). The intervals (`heartbeat_interval`,
  `maintenance_interval`) are 0 here: the machine decides when a beat or a maintenance
  pass is due, and the library's gate (on `time.monotonic()`) always lets it through.
- Fencing token: none. The claim's token is the worker's own `MessageProxy` of that
  delivery (what dramatiq's worker keeps and later acks or nacks), named by a fresh id.
  Every later statement matches by `message_id` (and `queue_name`, `state`) alone.
- Heartbeats: per process, not per message: `HEARTBEAT` upserts the worker's row with
  `heartbeat_at = NOW()`, and one beat keeps every message the process holds, so
  `heartbeat_renews = "worker"`. It names no message and cannot refuse: fire and
  forget (`heartbeat_answers = False`).
- When a lease runs out: `maybe_maintenance` (every consumer runs it every
  `maintenance_interval`; one at a time, under `pg_try_advisory_xact_lock`) requeues
  every `consumed` message whose worker's row is missing or has not beaten within
  `heartbeat_ttl` (`REAP`). That is `maintain()`, run by the machine's sweeper. The
  ttl is the harness's lease, 30 s (the library's default is 60 s).
- Completion: dramatiq's worker thread runs the actor, the middleware's
  `after_process_message` runs, and the consumer thread's `post_process_message` acks
  (`ACK`: `DELETE ... WHERE message_id = ... AND queue_name = ... AND state = 'consumed'`).
  The task body runs before and outside that statement, so `transactional_effects =
  False`: the machine runs the effect as the body and `complete()` only reports.
  dramatiq answers nothing (None); the adapter answers whether the library's ACK
  deleted the row (its row count, read off the library's own cursor).
- Failure: the Retries middleware (`after_process_message` with the exception): below
  the actor's `max_retries` it re-enqueues the message (`ENQUEUE`: an upsert by
  `message_id`, back to `queued`, with its retry count), else marks it failed; then
  `post_process_message` acks it (which, back in `queued`, deletes nothing) or nacks it
  (`NACK`: `state = 'rejected'`, unless already rejected). The actor's `min_backoff` is
  0, so a retry is due at once, on the same queue (with a backoff, dramatiq parks it on
  the delay queue and its consumer thread moves it back when due). Answered by the
  upsert's row count (a retry) or the NACK's (a failure for good).
- Retry cap: the actor's `max_retries` (2 here; dramatiq's default is 20) counts
  exceptions only, in the message's own options: the third failure report gives the
  message up (`max_failures = 3`). Deliveries are not capped: a message whose worker
  keeps dying is requeued by maintenance forever (dramatiq declined such a cap, PR
  #383), so `max_attempts = None`.
- Revocation (`revokes_expired`): False. Maintenance requeues the message of a silent
  worker; nothing refuses that worker's later ack, nack or retry, which match by id.
- State: the row's `state`: `queued` is queued, `consumed` running, `rejected` failed;
  an acked message has no row: done (`purge_maxage`, 30 days of the queue's clock,
  deletes rejected rows no sooner).
- Time: every timestamp is the server's `NOW()`, the harness's clock.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import dramatiq
import psycopg
from dramatiq.broker import MessageProxy
from dramatiq_postgres import PostgresBroker
from dramatiq_postgres.broker import CLAIM_BATCH_MAX, QUERIES
from dramatiq_postgres.schema import init
from dramatiq_postgres.utils import make_pool
from psycopg import Connection
from psycopg.conninfo import conninfo_to_dict

from leasecheck.adapters.pinned_sync import PinnedSyncPool
from leasecheck.stateful.contract import DONE, FAILED, QUEUED, RUNNING, Claim, Effect, JobId
from leasecheck.stateful.sqlfile import load

SQL = load(Path(__file__).with_name("dramatiq_postgres.sql"))
QUEUE = "default"
ACTOR = "leasecheck_job"
VERSION = version("dramatiq-postgres")
WORKERS = uuid.UUID("6f1d3c52-8a0e-4f5e-9d0b-3b1a7c9e2d40")
"""The namespace of the worker ids derived from the machine's worker names."""

STATES = {"queued": QUEUED, "consumed": RUNNING, "rejected": FAILED}
"""dramatiq-postgres's message states as the contract names them (no row: done)."""


@dataclasses.dataclass(frozen=True)
class Delivery:
    """A claim's token: a fresh id for one delivery, and the worker's own message of it."""

    key: str
    message: MessageProxy = dataclasses.field(compare=False, repr=False)

    def __repr__(self) -> str:
        return self.key


class Answers:
    """The row count each statement of one call answered, read off the library's cursors."""

    def __init__(self) -> None:
        self.rows: list[tuple[object, int]] = []

    def of(self, query: str) -> int | None:
        """The row count of the latest run of `query` (None: it did not run)."""
        for sent, count in reversed(self.rows):
            if sent == query:
                return count
        return None

    def cursor(self) -> type[psycopg.Cursor[Any]]:
        """A cursor class that records each statement's row count here."""
        rows = self.rows

        class Recording(psycopg.Cursor[Any]):
            def execute(self, query: Any, params: Any = None, **kw: Any) -> Recording:
                super().execute(query, params, **kw)
                rows.append((query, self.rowcount))
                return self

        return Recording


class Client:
    """One session's dramatiq-postgres: its pool, as `make_pool` makes it, and a broker."""

    def __init__(self, dsn: str, ttl: timedelta, max_retries: int) -> None:
        self.answers = Answers()
        params: dict[str, Any] = dict(conninfo_to_dict(dsn))
        params["cursor_factory"] = self.answers.cursor()
        self.pool = make_pool(params)
        self.broker = _broker(self.pool, max_retries, heartbeat_ttl=ttl.total_seconds())

    def speaking_as(self, worker: str) -> PostgresBroker:
        """The broker, as the process the machine's `worker` is; the answers emptied."""
        self.answers.rows.clear()
        self.broker.worker_id = str(uuid.uuid5(WORKERS, worker))
        return self.broker


def _broker(pool: Any, max_retries: int, **options: Any) -> PostgresBroker:
    """A broker on `pool` with the one actor every job runs, as a worker process has it."""
    broker = PostgresBroker(
        pool=pool,
        results=False,
        listen=False,
        heartbeat_interval=0.0,
        maintenance_interval=0.0,
        **options,
    )
    dramatiq.Actor(
        _body,
        broker=broker,
        actor_name=ACTOR,
        queue_name=QUEUE,
        priority=0,
        options={"max_retries": max_retries, "min_backoff": 0},
    )
    return broker


def _body(**payload: Any) -> None:
    """The actor; never run here (the machine runs the task body as its effect)."""


def _post_process(broker: PostgresBroker, message: MessageProxy) -> None:
    """dramatiq's `_ConsumerThread.post_process_message`: nack if failed, else ack."""
    consumer = broker.consume(QUEUE)
    try:
        if message.failed:
            broker.emit_before("nack", message)
            consumer.nack(message)
            broker.emit_after("nack", message)
        else:
            broker.emit_before("ack", message)
            consumer.ack(message)
            broker.emit_after("ack", message)
    finally:
        consumer.close()


class DramatiqPostgresQueue:
    """dramatiq's worker protocol on dramatiq-postgres's broker, one contract call at a time."""

    name = f"dramatiq-postgres-{VERSION}"
    ordered_tokens = False
    heartbeats = True
    heartbeat_answers = False
    heartbeat_renews = "worker"
    held_transactions = False
    transactional_effects = False
    revokes_expired = False
    max_attempts: int | None = None

    def __init__(self, max_retries: int = 2, ttl: timedelta = timedelta(seconds=30)) -> None:
        self.max_failures = max_retries + 1
        self._max_retries = max_retries
        self._ttl = ttl

    def connect(self, name: str, dsn: str) -> Client:
        return Client(dsn, self._ttl, self._max_retries)

    def disconnect(self, client: Client) -> None:
        client.pool.close(timeout=1.0)

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction(), conn.cursor() as cur:
            init(cur)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(SQL["reset"].text)

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> str:
        """`actor.send_with_options(kwargs=payload)`, on the harness's connection."""
        broker = _broker(PinnedSyncPool(conn), self._max_retries)
        message = broker.get_actor(ACTOR).send_with_options(kwargs=payload)
        return str(message.message_id)

    def claim(self, client: Client, worker: str, lease: timedelta) -> Claim | None:
        claims = self.claim_many(client, worker, lease, 1)
        return claims[0] if claims else None

    def claim_many(self, client: Client, worker: str, lease: timedelta, n: int) -> list[Claim]:
        """`PostgresConsumer.__next__` up to its claim: the worker beats, then claims."""
        broker = client.speaking_as(worker)
        consumer = broker.consume(QUEUE, prefetch=n)
        try:
            broker.maybe_heartbeat(consumer.get_consume_conn())
            consumer.claim(min(n, CLAIM_BATCH_MAX))
            messages = list(consumer.buffer)
        finally:
            consumer.close()
        return [
            Claim(
                job_id=str(message.message_id),
                token=Delivery(f"{worker}:{uuid.uuid4().hex[:8]}", MessageProxy(message)),
                worker=worker,
            )
            for message in messages
        ]

    def heartbeat(self, client: Client, claim: Claim, lease: timedelta) -> None:
        """The consumer loop's `maybe_heartbeat`: the process's row; it answers None."""
        broker = client.speaking_as(claim.worker)
        consumer = broker.consume(QUEUE)
        try:
            broker.maybe_heartbeat(consumer.get_consume_conn())
        finally:
            consumer.close()

    def maintain(self, client: Client) -> None:
        """One `maybe_maintenance` pass, on a consumer's connection, as a consumer runs it."""
        broker = client.speaking_as("leasecheck-maintenance")
        consumer = broker.consume(QUEUE)
        try:
            broker.maybe_maintenance(consumer.get_consume_conn())
        finally:
            consumer.close()

    def complete(self, client: Client, claim: Claim, effect: Effect) -> bool:
        """The actor returned: middleware, then the ack; the body (the effect) ran before."""
        broker = client.speaking_as(claim.worker)
        message = cast(Delivery, claim.token).message
        broker.emit_after("process_message", message, result=None)
        _post_process(broker, message)
        return client.answers.of(QUERIES.ACK) == 1

    def fail(self, client: Client, claim: Claim, error: str) -> bool:
        """The actor raised: Retries re-enqueues or fails the message, then ack or nack."""
        broker = client.speaking_as(claim.worker)
        message = cast(Delivery, claim.token).message
        try:
            raise RuntimeError(error)
        except RuntimeError as exc:
            message.stuff_exception(exc)
            broker.emit_after("process_message", message, exception=exc)
        _post_process(broker, message)
        if message.failed:
            return client.answers.of(QUERIES.NACK) == 1
        return client.answers.of(QUERIES.ENQUEUE) == 1

    def state(self, conn: Connection[Any], job_id: JobId) -> str:
        row = conn.execute(SQL["state"].text, {"id": str(job_id)}).fetchone()
        return DONE if row is None else STATES[row[0]]

    def effect_key(self, claim: Claim) -> str:
        return f"dramatiq-message-{claim.job_id}"


Queue = DramatiqPostgresQueue
