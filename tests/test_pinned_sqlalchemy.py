"""The SQLAlchemy pin (`leasecheck.adapters.pinned_sqlalchemy`) against a real PostgreSQL.

The engine runs on the session it is lent; its transactions are real ones on the
harness's autocommit connection, and savepoints inside one the harness holds; after
its set-up it sends nothing but the library's statements. And a queue written on
SQLAlchemy Core through it holds every property of the machine, while the same queue
completing under SQLAlchemy's AUTOCOMMIT (its statements not one transaction) is caught.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("sqlalchemy", reason="SQLAlchemy is not installed: pip install 'sqlalchemy>=2'")

from sqlalchemy import text

from leasecheck.adapters.pinned_sqlalchemy import PinnedEngine
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock, opening
from leasecheck.stateful.contract import Claim, Effect
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.sqlfile import load
from leasecheck.stateful.story import replay
from tests.fixtures import derandomized

QUERIES = load(Path(__file__).parent.parent / "reference" / "queries.sql")


def _sql(name: str) -> Any:
    """The reference's statement `name`, with SQLAlchemy's named parameters."""
    return text(re.sub(r"%\((\w+)\)s", r":\1", QUERIES[name].text))


class CoreQueue(ReferenceQueue):
    """The reference's statements run through SQLAlchemy Core on a pinned engine, as a
    library built on SQLAlchemy would run them; the schema, reset, enqueue and batches
    are the reference's. The engine is made at the first reset (on the harness's monitor,
    outside any step), so that no call ever runs its set-up."""

    name = "sqlalchemy-core"
    completion_level: str | None = None
    """SQLAlchemy's isolation level for the completion (None: the engine's default)."""

    def __init__(self) -> None:
        super().__init__()
        self.pin: PinnedEngine | None = None

    def reset(self, conn: psycopg.Connection[Any]) -> None:
        super().reset(conn)
        if self.pin is None:
            self.pin = PinnedEngine(conn)

    def _engine(self, conn: psycopg.Connection[Any]) -> Any:
        assert self.pin is not None, "the harness resets the queue before any call"
        return self.pin.lending(conn)

    def claim(self, conn: psycopg.Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        with self._engine(conn) as engine, engine.begin() as c:
            row = c.execute(_sql("claim"), {"worker": worker, "lease": lease}).first()
        return None if row is None else Claim(job_id=int(row[0]), token=int(row[1]), worker=worker)

    def heartbeat(self, conn: psycopg.Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "lease": lease}
        with self._engine(conn) as engine, engine.begin() as c:
            return c.execute(_sql("heartbeat"), params).first() is not None

    def complete(self, conn: psycopg.Connection[Any], claim: Claim, effect: Effect) -> bool:
        with self._engine(conn) as engine:
            options = {"isolation_level": self.completion_level} if self.completion_level else {}
            with engine.connect().execution_options(**options) as c:
                row = c.execute(_sql("complete"), {"id": claim.job_id, "attempt": claim.token})
                if row.first() is None:
                    c.rollback()
                    return False
                effect(conn)  # the effect's row, on the same session: in the same transaction
                c.commit()
                return True

    def fail(self, conn: psycopg.Connection[Any], claim: Claim, error: str) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "error": error}
        with self._engine(conn) as engine, engine.begin() as c:
            return c.execute(_sql("fail"), params).first() is not None


class CompletesInAutocommit(CoreQueue):
    """The same, with the completion under SQLAlchemy's AUTOCOMMIT: the UPDATE commits
    before the effect runs, so a worker that dies between them leaves the job done
    with no effect."""

    name = "sqlalchemy-core-autocommit-completion"
    completion_level = "AUTOCOMMIT"


@pytest.fixture
def conn(reference_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with clock.connect(reference_dsn) as c:
        ReferenceQueue().reset(c)
        yield c


@pytest.fixture
def other(reference_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with clock.connect(reference_dsn) as c:
        yield c


def _jobs(c: psycopg.Connection[Any]) -> int:
    row = c.execute("select count(*) from jobs").fetchone()
    assert row is not None
    return int(row[0])


INSERT = text("insert into jobs (payload) values ('{}')")


def _insert_then_fail(engine: Any) -> None:
    with engine.begin() as c:
        c.execute(INSERT)
        raise RuntimeError("the block fails")


def test_the_engine_runs_on_the_session_it_is_lent(conn: psycopg.Connection[Any]) -> None:
    pin = PinnedEngine(conn)
    with pin.lending(conn) as engine, engine.connect() as c:
        assert c.execute(text("select pg_backend_pid()")).scalar() == conn.info.backend_pid


def test_each_thread_checks_out_the_session_it_lent(
    conn: psycopg.Connection[Any], other: psycopg.Connection[Any]
) -> None:
    """Two workers' calls run at once, each on its session's thread: both lend before
    either checks out, and each still runs on its own session."""
    pin = PinnedEngine(conn)
    both_lent = threading.Barrier(2)
    seen: dict[str, object] = {}

    def call(name: str, session: psycopg.Connection[Any]) -> None:
        with pin.lending(session) as engine:
            both_lent.wait(timeout=10)
            with engine.connect() as c:
                seen[name] = c.execute(text("select pg_backend_pid()")).scalar()

    threads = [
        threading.Thread(target=call, args=(name, session))
        for name, session in (("a", conn), ("b", other))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert seen == {"a": conn.info.backend_pid, "b": other.info.backend_pid}


def test_outside_a_loan_the_engine_refuses(conn: psycopg.Connection[Any]) -> None:
    pin = PinnedEngine(conn)
    with pytest.raises(RuntimeError, match=re.escape("outside `with pin.lending(conn)`")):
        pin.engine.connect()


def test_a_block_is_one_transaction(
    conn: psycopg.Connection[Any], other: psycopg.Connection[Any]
) -> None:
    pin = PinnedEngine(conn)
    with pin.lending(conn) as engine:
        with engine.begin() as c:
            c.execute(INSERT)
            assert _jobs(other) == 0, "committed before the block ended"
        assert _jobs(other) == 1
        assert (pin.last_status, pin.last_rowcount) == ("INSERT 0 1", 1)
        with pytest.raises(RuntimeError):
            _insert_then_fail(engine)
    assert _jobs(other) == 1
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_inside_the_harness_transaction_it_takes_a_savepoint(
    conn: psycopg.Connection[Any], other: psycopg.Connection[Any]
) -> None:
    pin = PinnedEngine(conn)
    conn.execute("begin")
    with pin.lending(conn) as engine:
        with engine.begin() as c:
            c.execute(INSERT)
        assert _jobs(other) == 0, "the library committed the harness's transaction"
        with pytest.raises(Exception, match='column "nope" does not exist'), engine.begin() as c:
            c.execute(text("select nope"))
    assert _jobs(conn) == 1, "the failed block undid more than its own work"
    conn.execute("rollback")
    assert _jobs(other) == 0


def test_after_its_set_up_a_call_sends_only_its_statements(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pin = PinnedEngine(conn)
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def spied(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", spied)
    for _ in range(2):
        with pin.lending(conn) as engine, engine.begin() as c:
            c.execute(text("select 1"))
        assert sent == ["begin", "select 1", "commit"]
        sent.clear()
    with pin.lending(conn) as engine:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text("select 2"))
        assert sent == ["select 2"]
        sent.clear()
        with engine.connect().execution_options(isolation_level="SERIALIZABLE") as c:
            c.execute(text("select 3"))
            c.commit()
        assert sent == ["begin isolation level serializable", "select 3", "commit"]


def test_a_queue_on_sqlalchemy_core_holds_the_opening_and_a_search(
    reference_pool: actors.Pool,
) -> None:
    harness = Harness(queue=CoreQueue(), pool=reference_pool)
    harness.reset()
    opening.play(harness)
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(60))


def test_its_completion_in_autocommit_is_caught(reference_pool: actors.Pool) -> None:
    """A completion paused after its UPDATE, and its worker crashed there: under AUTOCOMMIT
    the job stays done with no effect; in the engine's transaction, nothing committed."""
    program = [
        Step("start", {"workers": 2}),
        Step("claim", {"how": opening.FIRST}),
        Step("preempt", {"pick": 0, "after": 1, "hold": 6}),
        Step("complete", {"pick": 0}),
        Step("crash", {"pick": 0}),
    ]
    for queue in (CoreQueue(), CompletesInAutocommit()):
        harness = Harness(queue=queue, pool=reference_pool)
        harness.reset()
        if queue.completion_level is None:
            replay.replay(harness, program)
            continue
        with pytest.raises(PropertyViolated) as caught:
            replay.replay(harness, program)
        assert caught.value.violation.prop == "done-effect", caught.value.violation
