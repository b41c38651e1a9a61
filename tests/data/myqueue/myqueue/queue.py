"""Tasks leased with FOR UPDATE SKIP LOCKED; `epoch` counts the leases a task was given.

A claim is a plain (task id, epoch, worker) tuple. Every change to a running task is
fenced on its epoch, and a task whose lease runs out on its last attempt is given up
by the next claim.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

SCHEMA = """
create table mq_tasks (
    id        bigserial primary key,
    body      jsonb not null,
    state     text not null default 'ready',
    epoch     int not null default 0,
    tries_max int not null,
    holder    text,
    expires   timestamptz
);
create index mq_ready on mq_tasks (id) where state in ('ready', 'leased');
"""

CLAIM = """
with dead as (
    update mq_tasks set state = 'dead', holder = null, expires = null
     where state = 'leased' and expires <= now() and epoch >= tries_max
), pick as (
    select id from mq_tasks
     where state = 'ready' or (state = 'leased' and expires <= now() and epoch < tries_max)
     order by id limit 1 for update skip locked
)
update mq_tasks t
   set state = 'leased', epoch = t.epoch + 1, holder = %(worker)s, expires = now() + %(lease)s
  from pick where t.id = pick.id
returning t.id, t.epoch
"""

STATES = {"ready": "queued", "leased": "running", "done": "done", "dead": "failed"}

FENCE = "where id = %(id)s and epoch = %(epoch)s and state = 'leased'"

Claim = tuple[int, int, str]
"""(task id, epoch, worker)."""


class Queue:
    name = "myqueue"
    max_attempts = 3
    ordered_tokens = True

    def install(self, conn: Connection[Any]) -> None:
        conn.execute(SCHEMA)

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute("truncate mq_tasks restart identity")

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> int:
        row = conn.execute(
            "insert into mq_tasks (body, tries_max) values (%s, %s) returning id",
            (Jsonb(payload), self.max_attempts),
        ).fetchone()
        assert row is not None, "insert ... returning gives its row"
        return int(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        row = conn.execute(CLAIM, {"worker": worker, "lease": lease}).fetchone()
        return None if row is None else (row[0], row[1], worker)

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        task, epoch, _ = claim
        sql = f"update mq_tasks set expires = now() + %(lease)s {FENCE} returning id"
        return self._one(conn, sql, {"lease": lease, "id": task, "epoch": epoch})

    def complete(
        self, conn: Connection[Any], claim: Claim, effect: Callable[[Connection[Any]], None]
    ) -> bool:
        task, epoch, _ = claim
        sql = f"update mq_tasks set state = 'done', holder = null, expires = null {FENCE} returning id"  # noqa: E501
        with conn.transaction():
            if not self._one(conn, sql, {"id": task, "epoch": epoch}):
                return False
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        task, epoch, _ = claim
        sql = (
            "update mq_tasks set state = case when epoch >= tries_max then 'dead' else 'ready' end,"
            f" holder = null, expires = null {FENCE} returning id"
        )
        return self._one(conn, sql, {"id": task, "epoch": epoch})

    def effect_key(self, claim: Claim) -> str:
        return f"mq-task-{claim[0]}"

    def state(self, conn: Connection[Any], task: int) -> str:
        row = conn.execute("select state from mq_tasks where id = %s", (task,)).fetchone()
        assert row is not None, f"no task {task}"
        return STATES[row[0]]

    @staticmethod
    def _one(conn: Connection[Any], sql: str, params: Mapping[str, Any]) -> bool:
        return conn.execute(sql, params).fetchone() is not None
