"""myqueue with the story's bug: a completion checks the task id only, not its epoch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import Connection

from myqueue import queue


class Queue(queue.Queue):
    name = "myqueue-buggy"

    def complete(
        self, conn: Connection[Any], claim: queue.Claim, effect: Callable[[Connection[Any]], None]
    ) -> bool:
        sql = (
            "update mq_tasks set state = 'done', holder = null, expires = null"
            " where id = %s returning id"
        )
        with conn.transaction():
            if conn.execute(sql, (claim[0],)).fetchone() is None:
                return False
            effect(conn)
            return True
