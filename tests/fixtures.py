"""The repository's own fixtures: the reference queue on a database of its own.

leasecheck's own tests (the reference's semantics, the mutants, the harness) always
run on the reference schema, whatever queue the property run is pointed at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from leasecheck.dbfixtures import janitor
from leasecheck.kit import budget
from leasecheck.proxy import Proxy
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock, contract
from leasecheck.stateful.contract import Queue
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.program import Step
from leasecheck.stateful.story import replay

REFERENCE = "leasecheck.reference.queue:ReferenceQueue"


derandomized = budget
"""A budget of so many examples that runs alike every time (`leasecheck.kit.budget`)."""


@contextmanager
def pool_on_own_database(server_dsn: str, label: str, queue: Queue) -> Iterator[actors.Pool]:
    """Yield a pool on a fresh database named after `label`, with the clock and `queue`'s
    schema installed; close it and drop the database after."""
    with janitor.temporary(server_dsn, label) as dsn:
        clock.prepare(dsn, queue)
        pool = actors.Pool(dsn, clients=contract.clients(queue))
        try:
            yield pool
        finally:
            pool.close()


@contextmanager
def harnesses(dsn: str) -> Iterator[Callable[..., Harness]]:
    """Yield a function that gives a harness of `spec`'s queue on `dsn`, a database the
    suite created (the schema installed by the first; its sessions opened through
    `proxy`, if given); close every pool after."""
    pools: list[actors.Pool] = []

    def make(spec: str, proxy: Proxy | None = None) -> Harness:
        queue = contract.load(spec)
        if not pools:
            clock.prepare(dsn, queue)
        pools.append(actors.Pool(dsn, proxy=proxy))
        harness = Harness(queue=queue, pool=pools[-1], spec=spec)
        harness.reset()
        return harness

    try:
        yield make
    finally:
        for pool in pools:
            pool.close()


def replayed(queue: Queue, pool: actors.Pool, steps: list[Step]) -> list[str]:
    """Replay `steps` on `queue` (every step must apply) and return the story it told."""
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    story: list[str] = []
    done = replay.replay(harness, steps, say=story.append)
    assert done.skipped == [], done.skipped
    return story


@pytest.fixture(scope="session")
def reference_dsn(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a DSN for a database of this worker's own with the clock and the reference."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_ref") as dsn:
        clock.prepare(dsn, ReferenceQueue())
        yield dsn


@pytest.fixture
def reference_pool(reference_dsn: str) -> Iterator[actors.Pool]:
    """Return a connection pool on the database with the reference schema."""
    pool = actors.Pool(reference_dsn)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def db(reference_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return an autocommit connection on simulated time, with the reference and clock reset."""
    with clock.connect(reference_dsn) as conn:
        ReferenceQueue().reset(conn)
        clock.reset(conn)
        yield conn
