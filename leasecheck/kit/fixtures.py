"""An adapter's test database, the machine's pool on it, and a connection on simulated
time: the scaffold each adapter's tests used to write out by hand."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
import pytest

from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors

Fixture = Callable[..., Any]


def fixtures(
    make_queue: Callable[[], Any], label: str, needs: Sequence[str] = ()
) -> tuple[Fixture, Fixture, Fixture]:
    """Return the fixtures `adapter_dsn`, `pool` and `conn` for a test module, to assign
    at its top: `adapter_dsn, pool, conn = kit.fixtures(MyLibQueue, "mylib")`.

    - `adapter_dsn` (per module): a database of the suite's own on the run's server
      (named after `label` and the xdist worker), with the harness's clock and the
      queue installed by `make_queue().install`, autovacuum off; dropped after.
    - `pool`: the machine's sessions on it, for a `Harness` (each a client of the
      queue's, through the stepping proxy, when it opens its own connections); closed
      after.
    - `conn`: a connection on simulated time, with the queue (`reset`) and the clock
      back at their start, for tests that call the adapter directly.

    `make_queue` builds the queue (any object with the contract's members: a queue with
    a claim type of its own is no `Queue` to a type checker). `needs` names fixtures of
    the module's own (module-scoped or wider) that must be set up before the queue can
    be built, a pinned package say: the database asks for them as arguments, so pytest
    sets them up first and keeps them up as long.
    """

    def make_database(
        leasecheck_server_dsn: str, leasecheck_worker_label: str, **needed: object
    ) -> Iterator[str]:
        with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_{label}") as dsn:
            clock.prepare(dsn, make_queue())
            yield dsn

    own = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in needs]
    server = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for n in ("leasecheck_server_dsn", "leasecheck_worker_label")
    ]
    make_database.__signature__ = inspect.Signature([*server, *own])  # type: ignore[attr-defined]
    adapter_dsn = pytest.fixture(scope="module", name="adapter_dsn")(make_database)

    @pytest.fixture(name="pool")
    def pool(adapter_dsn: str) -> Iterator[actors.Pool]:
        sessions = actors.Pool(adapter_dsn, clients=contract.clients(make_queue()))
        try:
            yield sessions
        finally:
            sessions.close()

    @pytest.fixture(name="conn")
    def conn(adapter_dsn: str) -> Iterator[psycopg.Connection[Any]]:
        with clock.connect(adapter_dsn) as c:
            make_queue().reset(c)
            clock.reset(c)
            yield c

    return adapter_dsn, pool, conn
