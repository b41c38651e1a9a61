"""The repository's own fixtures: the reference queue on a database of its own.

leasecheck's own tests (the reference's semantics, the mutants, the harness) always
run on the reference schema, whatever queue the property run is pointed at.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, settings

from leasecheck.dbfixtures import janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock
from leasecheck.stateful.contract import Queue
from leasecheck.stateful.engine import actors

REFERENCE = "leasecheck.reference.queue:ReferenceQueue"


def derandomized(examples: int) -> settings:
    """A budget of `examples` that runs alike every time: fixed seed, no shrinking, no
    database of examples, the first failure reported as it is."""
    return settings(
        max_examples=examples,
        stateful_step_count=30,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@contextmanager
def pool_on_own_database(server_dsn: str, label: str, queue: Queue) -> Iterator[actors.Pool]:
    """Yield a pool on a fresh database named after `label`, with the clock and `queue`'s
    schema installed; close it and drop the database after."""
    with janitor.temporary(server_dsn, label) as dsn:
        clock.prepare(dsn, queue)
        pool = actors.Pool(dsn)
        try:
            yield pool
        finally:
            pool.close()


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
