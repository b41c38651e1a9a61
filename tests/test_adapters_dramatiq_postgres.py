"""The dramatiq-postgres adapter against a real PostgreSQL, on the library's own pool:
the kit's tests, and the counterexamples the matrix committed replayed on it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "dramatiq_postgres",
    reason="dramatiq-postgres is not installed: "
    "pip install dramatiq-postgres==1.4.0 dramatiq==2.2.1",
)

from leasecheck import kit
from leasecheck.adapters.dramatiq_postgres_queue import DramatiqPostgresQueue

COUNTEREXAMPLES = (
    Path(__file__).parent.parent / "matrix/results/counterexamples/dramatiq-postgres-1.4.0"
)
GIVEN_UP = frozenset(
    {
        "single-completion",
        "exclusive-lease",
        "fencing",
        "retry-cap",
        "owner-progress",
        "late-owner",
        "no-lost-jobs",
    }
)
"""What dramatiq-postgres 1.4.0 does not promise (docs/findings/dramatiq-postgres-1.4.0.md):
its ack, nack and retry act on the message id alone, so a worker process frozen past
`heartbeat_ttl` acts on a message another process runs; and its cap counts exceptions,
not deliveries (dramatiq PR #383)."""

adapter_dsn, pool, conn = kit.fixtures(DramatiqPostgresQueue, "dramatiq_postgres")


class TestDramatiqPostgres(kit.AdapterTests):
    queue = DramatiqPostgresQueue
    given_up = GIVEN_UP
    counterexamples = COUNTEREXAMPLES
    examples = 40
