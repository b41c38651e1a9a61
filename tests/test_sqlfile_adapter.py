"""The SQL-file adapter: strict loading, a round trip on a real PostgreSQL, and teeth.

The queue files under `adapters/sql/` are the reference queue and three mutants written
as SQL only; the machine must pass the first and kill the others on their properties.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from leasecheck.adapters.sqlfile_queue import ENV, SqlFileError, SqlFileQueue, from_env
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import actors, clock
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.properties import PropertyViolated

FILES = Path(__file__).parent.parent / "leasecheck" / "adapters" / "sql"
REFERENCE = FILES / "reference.sql"
LEASE = timedelta(seconds=30)
MUTANTS = {
    "naive.sql": ("single-completion", "fencing"),
    "heartbeat_only.sql": ("single-completion", "fencing"),
    "attempt_key.sql": ("unique-effects",),
}
BUDGET = settings(
    max_examples=1000,
    stateful_step_count=30,
    derandomize=True,
    database=None,
    deadline=None,
    phases=(Phase.generate,),
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("path", sorted(FILES.glob("*.sql")), ids=lambda p: p.name)
def test_every_queue_file_loads(path: Path) -> None:
    """Each shipped queue file declares its cap and holds every query the contract needs."""
    queue = SqlFileQueue(path)
    assert queue.name == path.name
    assert queue.max_attempts == 3
    assert queue.ordered_tokens


def _broken(tmp_path: Path, text: str) -> Path:
    """Write `text` as a queue file; return its path."""
    path = tmp_path / "broken.sql"
    path.write_text(text)
    return path


def _without_query(name: str) -> str:
    source = REFERENCE.read_text()
    start = source.index(f"-- name: {name}\n")
    end = source.find("-- name:", start + 1)
    return source[:start] + (source[end:] if end >= 0 else "")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (_without_query("fail"), "missing queries fail"),
        (_without_query("effect_key"), "missing queries effect_key"),
        (
            REFERENCE.read_text().replace("heartbeats=true", "heartbeats=true retries=2"),
            "unknown header key 'retries'",
        ),
        (REFERENCE.read_text().replace("max_attempts=3 ", ""), "header lacks max_attempts"),
        (
            REFERENCE.read_text().replace("max_attempts=3", "max_attempts=0"),
            "max_attempts=0: give a positive integer or none",
        ),
        (
            REFERENCE.read_text().replace("ordered_tokens=true", "ordered_tokens=yes"),
            "ordered_tokens=yes: give true or false",
        ),
        (REFERENCE.read_text().replace("-- leasecheck:", "--"), "no '-- leasecheck:"),
        (
            REFERENCE.read_text().replace("-- name: fail\n", "-- name: give_up\n"),
            "unknown queries give_up",
        ),
    ],
    ids=["missing-fail", "missing-effect-key", "unknown-key", "no-cap", "zero-cap",
         "bad-flag", "no-header", "unknown-query"],
)  # fmt: skip
def test_a_bad_queue_file_fails_with_one_line(tmp_path: Path, text: str, says: str) -> None:
    """A missing query or a bad header is one line naming the file and what to fix."""
    path = _broken(tmp_path, text)
    with pytest.raises(SqlFileError) as caught:
        SqlFileQueue(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert says in message


def test_heartbeat_may_be_left_out_only_when_declared_absent(tmp_path: Path) -> None:
    """Without a heartbeat query the header must say heartbeats=false."""
    text = _without_query("heartbeat")
    with pytest.raises(SqlFileError, match="missing queries heartbeat"):
        SqlFileQueue(_broken(tmp_path, text))
    queue = SqlFileQueue(_broken(tmp_path, text.replace("heartbeats=true", "heartbeats=false")))
    assert not queue.heartbeats


def test_from_env_names_the_variable_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--leasecheck-queue leasecheck.adapters.sqlfile_queue:from_env` without the variable
    says what to set."""
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(SqlFileError, match=f"\\${ENV} is not set"):
        from_env()
    monkeypatch.setenv(ENV, str(REFERENCE))
    assert from_env().name == "reference.sql"


@pytest.fixture(scope="module")
def sqlfile_dsn(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return a DSN for a database of this module's own with reference.sql installed."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_sqlfile") as dsn:
        with clock.connect(dsn) as conn:
            clock.install(conn)
            SqlFileQueue(REFERENCE).install(conn)
            conn.execute("create table effects (id bigint generated always as identity)")
        yield dsn


@pytest.fixture
def conn(sqlfile_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Return a connection on simulated time with the queue, its effects and the clock reset."""
    with clock.connect(sqlfile_dsn) as c:
        SqlFileQueue(REFERENCE).reset(c)
        c.execute("delete from effects")
        clock.reset(c)
        yield c


def _effect(conn: psycopg.Connection[Any]) -> None:
    conn.execute("insert into effects default values")


def _effects(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("select count(*) from effects").fetchone()
    assert row is not None
    return int(row[0])


def test_round_trip_fences_the_late_worker(conn: psycopg.Connection[Any]) -> None:
    """Enqueue, claim, heartbeat, expire, reclaim: the stale claim is refused, the new one
    completes with its effect, and both claims carry the key the file computes."""
    queue = SqlFileQueue(REFERENCE)
    job = queue.enqueue(conn, {"receipt": 7})
    first = queue.claim(conn, "a", LEASE)
    assert first is not None
    assert (first.job_id, first.token) == (job, 1)
    assert queue.claim(conn, "b", LEASE) is None
    assert queue.heartbeat(conn, first, LEASE)
    clock.advance(conn, LEASE + timedelta(seconds=1))
    second = queue.claim(conn, "b", LEASE)
    assert second is not None
    assert (second.job_id, second.token) == (job, 2)
    assert queue.effect_key(first) == queue.effect_key(second) == f"job-{job}"
    assert not queue.heartbeat(conn, first, LEASE)
    assert not queue.complete(conn, first, _effect)
    assert not queue.fail(conn, first, "late")
    assert _effects(conn) == 0
    assert queue.complete(conn, second, _effect)
    assert _effects(conn) == 1
    assert not queue.complete(conn, second, _effect)
    assert _effects(conn) == 1


def test_completion_and_effect_share_one_transaction(conn: psycopg.Connection[Any]) -> None:
    """An effect that raises rolls the accepted completion back: the job can still complete."""
    queue = SqlFileQueue(REFERENCE)
    queue.enqueue(conn, {})
    claim = queue.claim(conn, "a", LEASE)
    assert claim is not None

    def explode(c: psycopg.Connection[Any]) -> None:
        _effect(c)
        raise RuntimeError("effect failed")

    with pytest.raises(RuntimeError, match="effect failed"):
        queue.complete(conn, claim, explode)
    assert _effects(conn) == 0
    assert queue.complete(conn, claim, _effect)
    assert _effects(conn) == 1


def test_fail_retries_until_the_declared_cap(conn: psycopg.Connection[Any]) -> None:
    """Failures go back to the queue until the header's max_attempts, then stay failed."""
    queue = SqlFileQueue(REFERENCE)
    queue.enqueue(conn, {})
    for attempt in (1, 2, 3):
        claim = queue.claim(conn, "a", LEASE)
        assert claim is not None
        assert claim.token == attempt
        assert queue.fail(conn, claim, f"boom {attempt}")
    assert queue.claim(conn, "a", LEASE) is None


def test_a_query_without_result_is_named(tmp_path: Path, conn: psycopg.Connection[Any]) -> None:
    """A completion written without `returning` cannot say whether it was accepted: one line."""
    text = REFERENCE.read_text().replace(
        "where id = %(id)s and attempt = %(token)s and status = 'running'\nreturning id\n\n"
        "-- name: fail",
        "where id = %(id)s and attempt = %(token)s and status = 'running'\n\n-- name: fail",
    )
    queue = SqlFileQueue(_broken(tmp_path, text))
    queue.enqueue(conn, {})
    claim = queue.claim(conn, "a", LEASE)
    assert claim is not None
    with pytest.raises(SqlFileError, match="query 'complete' returned no result set"):
        queue.complete(conn, claim, _effect)


@pytest.fixture
def pool(sqlfile_dsn: str) -> Iterator[actors.Pool]:
    """Return a connection pool on the database with reference.sql's schema."""
    pool = actors.Pool(sqlfile_dsn)
    try:
        yield pool
    finally:
        pool.close()


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutant_queue_file_is_killed(name: str, pool: actors.Pool) -> None:
    """The machine rejects each mutant written as SQL, on its property, within the budget."""
    harness = Harness(queue=SqlFileQueue(FILES / name), pool=pool)
    harness.reset()
    with pytest.raises(PropertyViolated) as caught:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    assert caught.value.violation.prop in MUTANTS[name], str(caught.value.violation)


def test_reference_queue_file_survives(pool: actors.Pool) -> None:
    """The reference written as SQL passes 100 derandomized examples (more than any mutant
    file needs to die; the full profile runs in `python -m matrix` and test_machine.py)."""
    harness = Harness(queue=SqlFileQueue(REFERENCE), pool=pool)
    harness.reset()
    run_state_machine_as_test(
        lambda: LeaseMachine(harness), settings=settings(BUDGET, max_examples=100)
    )
