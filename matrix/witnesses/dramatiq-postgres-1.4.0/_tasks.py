"""The witnesses' dramatiq module: the broker and the actor, as a user declares them.

Both the worker processes (`python -m dramatiq _tasks --processes 1 --threads 1`) and the
script (to send the message) import it. The broker is the README's,
`PostgresBroker(url=...)`, with the documented options shortened so a story takes
seconds: `heartbeat_interval=1`, `heartbeat_ttl=3`, `maintenance_interval=1`,
`poll_interval=0.2` (defaults 15, 60, 30 and 1 s). `url` is the README's "libpq URL or
kwargs dict"; the dict adds only an `application_name` naming the process
(`dramatiq-A`, `dramatiq-B`, ...), so the script's audit trigger can say whose session
wrote each row version.

Two middlewares of dramatiq's own kind are added: `CurrentMessage` (dramatiq's, so the
actor can read its message's id and retry count) and `Observer` (the witness's, which
only records each `after_ack`/`after_nack` the worker emits after the broker's ack or
nack returned, and changes nothing).

The actor, `receipt` (queue "default"), records each execution in `witness_executions`
(the task body's effect: the customer's receipt), then waits until the script releases
that execution (a file `release-N` in `$WITNESS_DIR`) and returns or raises as the file
says.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import dramatiq
import psycopg
from dramatiq.middleware import CurrentMessage, Middleware
from dramatiq_postgres import PostgresBroker
from psycopg.conninfo import conninfo_to_dict

NAME = os.environ.get("WITNESS_WORKER", "script")
DSN = os.environ["WITNESS_DSN"]
HEARTBEAT_INTERVAL = 1.0
HEARTBEAT_TTL = 3.0
MAINTENANCE_INTERVAL = 1.0
POLL_INTERVAL = 0.2
MAX_RETRIES = int(os.environ.get("WITNESS_MAX_RETRIES", "3"))
MIN_BACKOFF = int(os.environ.get("WITNESS_MIN_BACKOFF", "200"))
"""Retries' backoff in ms (dramatiq's default is 15 s; 0.2 s unless a witness says
otherwise): a retry goes through the delay queue, `default.DQ`, as every retry with a
backoff does, and is due one to two backoffs later."""


def record(sql: str, params: list[Any]) -> int:
    """Insert one row of the witness's own tables (not dramatiq's); return its number."""
    with psycopg.connect(DSN, autocommit=True) as conn:
        row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


class Observer(Middleware):
    """Records each ack and nack the worker made (emitted after the broker's call returned)."""

    def after_ack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        self._seen(broker, message, "ack")

    def after_nack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        self._seen(broker, message, "nack")

    def _seen(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, kind: str) -> None:
        record(
            "insert into witness_acks (worker, worker_id, kind, message_id, queue_name)"
            " values (%s, %s, %s, %s, %s) returning n",
            [
                NAME,
                getattr(broker, "worker_id", None),
                kind,
                message.message_id,
                message.queue_name,
            ],
        )


broker = PostgresBroker(
    url={**conninfo_to_dict(DSN), "application_name": f"dramatiq-{NAME}"},
    heartbeat_interval=HEARTBEAT_INTERVAL,
    heartbeat_ttl=HEARTBEAT_TTL,
    maintenance_interval=MAINTENANCE_INTERVAL,
    poll_interval=POLL_INTERVAL,
)
broker.add_middleware(CurrentMessage())
broker.add_middleware(Observer())
dramatiq.set_broker(broker)


@dramatiq.actor(max_retries=MAX_RETRIES, min_backoff=MIN_BACKOFF, max_backoff=2 * MIN_BACKOFF)
def receipt() -> str:
    """The task: record this execution (the receipt), wait to be released, end as told."""
    message = CurrentMessage.get_current_message()
    assert message is not None
    n = record(
        "insert into witness_executions (worker, worker_id, message_id, retries)"
        " values (%s, %s, %s, %s) returning n",
        [NAME, broker.worker_id, message.message_id, message.options.get("retries", 0)],
    )
    release = Path(os.environ["WITNESS_DIR"]) / f"release-{n}"
    while not release.exists():
        time.sleep(0.05)
    if release.read_text() == "raise":
        raise RuntimeError(f"execution {n} failed (the witness asked it to)")
    return f"receipt {n}"


@dramatiq.actor(queue_name="reports")
def report() -> None:
    """An actor of another queue, "reports": a worker started with `--queues reports` runs
    this queue only (it never claims a receipt), but its consumers run the broker's
    maintenance, which covers every queue of the table."""
