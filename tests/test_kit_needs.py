"""The kit's database waits for the fixtures a queue needs before it can be built (a
pinned package, say): `kit.fixtures(..., needs=(...))`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from leasecheck import kit
from leasecheck.reference.queue import ReferenceQueue

READY: list[str] = []


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    """What a real adapter's pin does: make the library importable for the module."""
    READY.append("installed")
    yield
    READY.clear()


def _queue() -> ReferenceQueue:
    assert READY, "the queue was built before the fixture it needs"
    return ReferenceQueue()


adapter_dsn, pool, conn = kit.fixtures(_queue, "needs", needs=("installed",))


def test_the_database_is_made_after_what_it_needs(conn: psycopg.Connection[Any]) -> None:
    """The test asks for the connection alone; the database's own argument brings the
    needed fixture up first (without it, building the queue fails)."""
    assert READY == ["installed"]
    queue = ReferenceQueue()
    job = queue.enqueue(conn, {"n": 1})
    assert queue.state(conn, job) == "queued"
