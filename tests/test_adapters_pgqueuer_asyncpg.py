"""The pgqueuer adapter on asyncpg, pgqueuer's own `AsyncpgDriver` on a connection of its
own per session: the kit's tests, and the matrix's counterexample replayed on it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("asyncpg", reason="asyncpg is not installed: pip install asyncpg")
pytest.importorskip("pgqueuer", reason="pgqueuer is not installed: pip install 'pgqueuer==1.6.*'")

from leasecheck import kit
from leasecheck.adapters.pgqueuer_asyncpg_queue import PgQueuerAsyncpgQueue

COUNTEREXAMPLES = (
    Path(__file__).parent.parent / "matrix/results/counterexamples/pgqueuer-1.6-asyncpg"
)

adapter_dsn, pool, conn = kit.fixtures(PgQueuerAsyncpgQueue, "pgqueuer_asyncpg")


class TestPgQueuerOnAsyncpg(kit.AdapterTests):
    queue = PgQueuerAsyncpgQueue
    given_up = frozenset({"fencing", "exclusive-lease"})  # as on psycopg: no fencing token
    counterexamples = COUNTEREXAMPLES
    examples = 40
