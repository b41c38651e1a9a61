"""pgqueuer 1.6 on asyncpg, as most of its users run it: its own `AsyncpgDriver`, on a
connection of its own.

The protocol is `pgqueuer_queue`'s (read its docstring: claim, heartbeat, completion,
failure, cap and state map onto the contract the same way). What differs is where a
worker's statements run: each of the harness's sessions opens an asyncpg connection on
the DSN the harness hands it (`contract.Clients`), and pgqueuer's own `AsyncpgDriver`
sends every statement of `Queries` there, in asyncpg's extended protocol (a statement
is prepared once per connection, then bound and executed), stepped on the wire by the
harness. asyncpg answers an `execute` with the statement's status line, which pgqueuer
returns; the adapter reads the row count from it, as on psycopg. `install`, `reset`,
`enqueue` and `state` stay on the harness's psycopg connection, as the contract says.

An asyncpg connection belongs to the event loop that opened it, so each session's
client keeps a loop of its own and runs every call on it, one at a time. A client whose
connection broke (the harness cut it) opens a new one at its next call, as a pool
would; after a crash the session's address is gone and that fails.
"""

from __future__ import annotations

import asyncio
import shlex
from typing import Any, TypeVar

import asyncpg
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.queries import Queries
from psycopg.conninfo import conninfo_to_dict

from leasecheck.adapters.pgqueuer_queue import PgQueuerQueue, Step

T = TypeVar("T")


def asyncpg_params(dsn: str) -> dict[str, Any]:
    """`asyncpg.connect` keywords for a libpq conninfo: `-c` options as server settings,
    `sslmode` as `ssl` (asyncpg takes libpq's mode names)."""
    given = conninfo_to_dict(dsn)
    ssl = given.pop("sslmode", None)
    settings: dict[str, str] = {}
    words = shlex.split(str(given.pop("options", "")))
    for flag, setting in zip(words[::2], words[1::2], strict=True):
        if flag != "-c":
            raise ValueError(f"options {words!r}: asyncpg takes only '-c name=value' settings")
        name, _, value = setting.partition("=")
        settings[name] = value
    params: dict[str, Any] = {"server_settings": settings}
    if ssl is not None:
        params["ssl"] = False if ssl == "disable" else ssl
    for libpq, keyword in (("host", "host"), ("port", "port"), ("user", "user"),
                           ("password", "password"), ("dbname", "database")):  # fmt: skip
        if libpq in given:
            value = str(given[libpq])
            params[keyword] = int(value) if keyword == "port" else value
    return params


class Recording(AsyncpgDriver):  # type: ignore[misc]  # pgqueuer is untyped in CI
    """pgqueuer's `AsyncpgDriver`, keeping the status line of its latest `execute`."""

    status = ""

    async def execute(self, query: str, *args: object) -> str:
        self.status = await super().execute(query, *args)
        return self.status


class Client:
    """One session's asyncpg connection and the event loop it lives on."""

    def __init__(self, dsn: str) -> None:
        self.params = asyncpg_params(dsn)
        self.loop = asyncio.new_event_loop()
        self.conn: asyncpg.Connection | None = None

    async def connection(self) -> asyncpg.Connection:
        """The open connection, or a new one if there is none or it broke."""
        if self.conn is None or self.conn.is_closed():
            self.conn = await asyncpg.connect(**self.params)
        return self.conn

    def run(self, step: Step[T]) -> T:
        """Run `step` on pgqueuer's `Queries` over this client's `AsyncpgDriver`."""

        async def on_driver() -> T:
            driver = Recording(await self.connection())
            return await step(Queries(driver), driver)

        return self.loop.run_until_complete(on_driver())

    def close(self) -> None:
        """Drop the connection at once (it may be dead) and the loop with it.

        A call still running on the loop in another thread (the harness ends a crashed
        session's call) gets its connection ended there, where the loop runs."""
        if self.loop.is_running():
            if self.conn is not None:
                self.loop.call_soon_threadsafe(self.conn.terminate)
            return
        if self.conn is not None and not self.conn.is_closed():
            self.conn.terminate()
        # The transport closes its socket in a callback of the loop's: let it run.
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()


class PgQueuerAsyncpgQueue(PgQueuerQueue):
    """pgqueuer's queue manager protocol on its `AsyncpgDriver`, one contract call at a time."""

    name = "pgqueuer-asyncpg"

    def connect(self, name: str, dsn: str) -> Client:
        return Client(dsn)

    def disconnect(self, client: Client) -> None:
        client.close()

    def _call(self, conn: Any, step: Step[T]) -> T:
        client: Client = conn
        return client.run(step)


Queue = PgQueuerAsyncpgQueue
