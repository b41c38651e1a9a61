"""The SQL-file adapter: strict loading, a round trip on a real PostgreSQL, and teeth.

The queue files under `adapters/sql/` are the reference queue and three mutants written
as SQL only; the machine must pass the first and kill the others on their properties.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import settings

from leasecheck import cli
from leasecheck.adapters.sqlfile_queue import ENV, SqlFileError, SqlFileQueue, from_env
from leasecheck.adapters.sqlfile_queue import LEASE as ADAPTER_LEASE
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock
from leasecheck.stateful.contract import CALLS, Claim, capabilities, not_checked
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from leasecheck.stateful.units import LEASE as MACHINE_LEASE
from tests.fixtures import derandomized

FILES = Path(__file__).parent.parent / "leasecheck" / "adapters" / "sql"
REFERENCE = FILES / "reference.sql"
LEASE = timedelta(seconds=30)
MUTANTS = {
    "naive.sql": ("single-completion", "fencing"),
    "heartbeat_only.sql": ("single-completion", "fencing"),
    "attempt_key.sql": ("unique-effects",),
}
BUDGET = derandomized(1000)


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


# --- v2: the features real queues' own SQL needs, each through the adapter ------------------

V2 = FILES / "reference_v2.sql"
V1_FILES = ("attempt_key.sql", "heartbeat_only.sql", "naive.sql", "reference.sql")


def _with_block(source: str, name: str, block: str) -> str:
    """Return `source` with its (first) `-- name: <name>` block replaced by `block`."""
    start = source.index(f"-- name: {name}\n")
    end = source.find("-- name:", start + 1)
    return source[:start] + block.strip("\n") + "\n\n" + (source[end:] if end >= 0 else "")


@pytest.mark.parametrize("name", V1_FILES)
def test_v1_files_keep_their_v1_meaning(name: str) -> None:
    """A v1 file declares exactly what it did: every call may be held, no one-claim rule,
    no state or maintain, late owners judged, effects transactional; each call's query is
    one statement, and install is one step of two statements run as written."""
    queue = SqlFileQueue(FILES / name)
    caps = capabilities(queue)
    assert queue.held_transactions and caps.held_transactions
    assert queue.held_calls == frozenset({"claim", "heartbeat", "complete", "fail"})
    assert queue.one_claim_per_worker is False and not caps.one_claim_per_worker
    assert caps.held_calls == frozenset(CALLS)
    assert (caps.state, caps.maintain) == (None, None)
    assert not caps.revokes_expired
    assert caps.transactional_effects
    assert len(queue.spec.install) == 1
    for query in queue.spec.queries.values():
        assert query.accepted == "rows"
        assert len(query.statements) == 1, query.name
    (install,) = queue.spec.install
    assert len(install.statements) == 2 and not install.bound  # as written, one transaction


def test_the_adapter_lease_is_the_machine_lease() -> None:
    """Queries that get no lease from their call are given the harness's: the very lease the
    machine claims with and models, or a queue that stores it per job would expire off-model."""
    assert timedelta(microseconds=MACHINE_LEASE) == ADAPTER_LEASE


def _v2_file(tmp_path: Path, text: str) -> SqlFileQueue:
    """Return the queue of a file holding `text`."""
    return SqlFileQueue(_broken(tmp_path, text))


@pytest.mark.parametrize(
    ("words", "held", "calls"),
    [
        ("", True, {"claim", "heartbeat", "complete", "fail"}),
        ("held_transactions=false", False, set()),
        ("held_transactions=complete", True, {"complete"}),
        ("held_transactions=claim,fail", True, {"claim", "fail"}),
    ],
)
def test_held_transactions_names_the_calls(
    tmp_path: Path, words: str, held: bool, calls: set[str]
) -> None:
    """held_transactions=true|false|a list of calls: held_calls says which calls may run in a
    transaction the harness holds open, held_transactions whether any may."""
    queue = _v2_file(tmp_path, V2.read_text().replace("held_transactions=true", words))
    assert queue.held_calls == frozenset(calls)
    assert queue.held_transactions is held
    caps = capabilities(queue)
    assert (caps.held_calls, caps.held_transactions) == (frozenset(calls), held)


def test_declarations_reach_the_contract(tmp_path: Path) -> None:
    """one_claim_per_worker, revokes_expired and transactional_effects become the attributes
    the machine reads; state and maintain become the contract's optional methods."""
    plain = SqlFileQueue(V2)
    caps = capabilities(plain)
    assert plain.one_claim_per_worker is False
    assert (caps.revokes_expired, caps.transactional_effects) == (False, True)
    assert caps.state is not None and caps.maintain is not None
    words = "one_claim_per_worker=true revokes_expired=true transactional_effects=false"
    declared = _v2_file(tmp_path, V2.read_text().replace("held_transactions=true", words))
    caps = capabilities(declared)
    assert declared.one_claim_per_worker is True and caps.one_claim_per_worker
    assert (caps.revokes_expired, caps.transactional_effects) == (True, False)


V2_TEXT = V2.read_text()


def _v2_with_install(steps: str) -> str:
    """Return reference_v2.sql with its install steps replaced by `steps`."""
    text = _with_block(_with_block(V2_TEXT, "install", ""), "install", "")
    return text + "\n" + steps


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (V2_TEXT.replace("accepted=not_null", "accept=not_null"),
         "query 'claim': unknown key 'accept'; a query declares accepted"),
        (V2_TEXT.replace("accepted=first_column_true", "accepted=maybe"),
         "query 'heartbeat': accepted=maybe: give one of rows, not_null, first_column_true"),
        (V2_TEXT.replace("accepted=not_null", "accepted=rowcount"),
         "query 'claim': accepted=rowcount: give one of rows, not_null"),
        (V2_TEXT.replace("shows it.\n", "shows it.\n-- leasecheck: accepted=rows\n"),
         "query 'state': accepted= applies only to claim, heartbeat, complete, fail"),
        (V2_TEXT.replace("held_transactions=true", "accepted=rows"),
         "header key 'accepted' belongs to one query: put '-- leasecheck: accepted=rows' under"),
        (V2_TEXT.replace("accepted=not_null", "max_attempts=2"),
         "query 'claim': 'max_attempts' declares the whole queue: move 'max_attempts=2' to the"),
        (V2_TEXT.replace("held_transactions=true", "held_transactions=complete,finish"),
         "held_transactions=complete,finish: give true, false or a comma list"),
        (V2_TEXT.replace("held_transactions=true", "one_claim_per_worker=yes"),
         "one_claim_per_worker=yes: give true or false"),
        (V2_TEXT.replace("held_transactions=true", "revokes_expired=1"),
         "revokes_expired=1: give true or false"),
        (V2_TEXT.replace("held_transactions=true", "transactional_effects=no"),
         "transactional_effects=no: give true or false"),
        (V2_TEXT.replace("accepted=not_null", "accepted=rows accepted=not_null"),
         "query 'claim': key 'accepted' given twice"),
        (V2_TEXT.replace("select id, attempt from claim_job(%(worker)s)",
                         "select id, attempt from claim_job(%(owner)s)"),
         "query 'claim' names %(owner)s, which it is not given; its parameters are worker, "
         "lease, max_attempts"),
        (V2_TEXT.replace("select status from jobs where id = %(id)s",
                         "select status from jobs where id = %(id)s and locked_by = %s"),
         "query 'state' holds '%s': it names parameters, so write %% for a literal percent"),
        (V2_TEXT.replace("select status from jobs where id = %(id)s",
                         "select status from jobs where id = %(id)s and status like 'q%'"),
         "query 'state' holds \"%'\": it names parameters, so write %%"),
        (V2_TEXT.replace("-- name: state\n-- The job's status as its row shows it.\n",
                         "-- name: state\n-- leasecheck: accepted=rows\n-- The job's status.\n"),
         "query 'state': its first line must be a '-- description'"),
        (V2_TEXT.replace("select status from jobs",
                         "select status\n-- leasecheck: accepted=rows\nfrom jobs"),
         "query 'state': a '-- leasecheck:' line inside the statement"),
        (V2_TEXT + "\n-- name: state\n-- Again.\nselect 'queued'\n",
         "query 'state' is defined twice; keep one (only install may repeat"),
        (V2_TEXT.replace("select status from jobs where id = %(id)s", "-- nothing here"),
         "query 'state' has no statement, only comments"),
        (V2_TEXT.replace("-- name: maintain", "-- name: sweep"),
         "unknown queries sweep; a queue file holds install, reset, enqueue, claim, heartbeat, "
         "complete, fail, effect_key, advance_clock, state, maintain"),
        (_with_block(V2_TEXT, "claim", ""), "missing queries claim"),
        (_v2_with_install(""), "missing queries install (add a '-- name: <query>' block"),
    ],
    ids=["query-unknown-key", "accepted-bad-value", "accepted-not-for-claim",
         "accepted-not-for-state", "query-key-in-header", "file-key-in-query",
         "held-unknown-call", "one-claim-bad", "revokes-bad", "effects-bad", "query-key-twice",
         "unknown-parameter", "positional-parameter", "lone-percent", "keys-before-description",
         "keys-inside-statement", "state-twice", "only-comments", "unknown-query",
         "missing-claim", "missing-install"],
)  # fmt: skip
def test_a_bad_v2_file_fails_with_one_line(tmp_path: Path, text: str, says: str) -> None:
    """Every v2 mistake is one line naming the file and saying how to fix it."""
    path = _broken(tmp_path, text)
    with pytest.raises(SqlFileError) as caught:
        SqlFileQueue(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert says in message


def test_a_query_that_names_no_parameter_runs_as_written(tmp_path: Path) -> None:
    """`%` is literal in a query that names no parameter (install's plpgsql `format('%s')`),
    as in v1; only a query that names one needs `%%`."""
    text = _with_block(
        V2_TEXT, "reset", "-- name: reset\n-- Empty it.\ndelete from jobs where 'a' like '%'"
    )
    assert not SqlFileQueue(_broken(tmp_path, text)).spec.queries["reset"].bound


@pytest.fixture
def blank(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[str]:
    """Return the DSN of a fresh database with the clock and an effects table, no queue."""
    with janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_sqlv2") as dsn:
        with clock.connect(dsn) as c:
            clock.install(c)
            c.execute("create table effects (id bigint generated always as identity)")
        yield dsn


@pytest.fixture
def v2(blank: str) -> Iterator[tuple[SqlFileQueue, psycopg.Connection[Any]]]:
    """Return reference_v2.sql installed (with its CREATE INDEX CONCURRENTLY step) and a
    connection on simulated time."""
    queue = SqlFileQueue(V2)
    with clock.connect(blank) as c:
        queue.install(c)
        yield queue, c


def _value(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def test_install_steps_run_each_in_its_own_transaction(
    v2: tuple[SqlFileQueue, psycopg.Connection[Any]],
) -> None:
    """reference_v2.sql's second step is CREATE INDEX CONCURRENTLY, which PostgreSQL refuses
    inside a transaction block: it ran, and the index is valid."""
    _, conn = v2
    assert _value(
        conn,
        "select i.indisvalid from pg_index i join pg_class c on c.oid = i.indexrelid "
        "where c.relname = 'jobs_claimable'",
    )


def test_a_failing_install_step_keeps_the_steps_before_it(
    tmp_path: Path, blank: str, leasecheck_server_dsn: str
) -> None:
    """Steps commit one by one: an enum value added in one step is usable in the next (one
    transaction would refuse it), and a step that fails leaves earlier steps committed."""
    steps = (
        "-- name: install\n-- Step 1.\ncreate type mood as enum ('calm');\n"
        "create table log (m mood)\n\n"
        "-- name: install\n-- Step 2.\nalter type mood add value 'busy'\n\n"
        "-- name: install\n-- Step 3 uses step 2's value.\ninsert into log values ('busy')\n\n"
        "-- name: install\n-- Step 4 fails.\nselect 1 / 0\n"
    )
    queue = _v2_file(tmp_path, _v2_with_install(steps))
    assert len(queue.spec.install) == 4
    with clock.connect(blank) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            queue.install(conn)
        assert _value(conn, "select m::text from log") == "busy"
    together = (
        "-- name: install\n-- Step 1.\ncreate type mood as enum ('calm');\n"
        "create table log (m mood)\n\n"
        "-- name: install\n-- Step 2 adds and uses.\nalter type mood add value 'busy';\n"
        "insert into log values ('busy')\n"
    )
    one = _v2_file(tmp_path, _v2_with_install(together))
    with janitor.temporary(leasecheck_server_dsn, "sqlv2_one") as dsn, clock.connect(dsn) as conn:
        with pytest.raises(psycopg.errors.UnsafeNewEnumValueUsage):
            one.install(conn)
        assert _value(conn, "select count(*) from pg_enum where enumlabel = 'busy'") == 0
        assert _value(conn, "select count(*) from log") == 0  # step 1 stayed


def _claim(queue: SqlFileQueue, conn: psycopg.Connection[Any], worker: str) -> Claim:
    claim = queue.claim(conn, worker, LEASE)
    assert claim is not None
    return claim


def test_v2_recovery_is_a_sweep_and_state_reads_it(
    v2: tuple[SqlFileQueue, psycopg.Connection[Any]],
) -> None:
    """reference_v2.sql: an expired job waits for the maintain sweep; swept, it is queued
    again and its late owner (nobody reclaimed it) may still complete; once reclaimed,
    the late owner is fenced. state answers from the job's row at each turn."""
    queue, conn = v2
    assert queue.state is not None and queue.maintain is not None
    late = queue.enqueue(conn, {})
    fenced = queue.enqueue(conn, {})
    assert _value(conn, "select lease from jobs where id = %s", late) == ADAPTER_LEASE
    first = _claim(queue, conn, "a")
    other = _claim(queue, conn, "b")
    assert (first.job_id, other.job_id) == (late, fenced)
    assert queue.claim(conn, "c", LEASE) is None  # the all-NULL row: nothing free
    assert queue.state(conn, late) == "running"
    clock.advance(conn, LEASE + timedelta(seconds=1))
    assert queue.claim(conn, "c", LEASE) is None  # expired, but only the sweep frees it
    queue.maintain(conn)
    assert queue.state(conn, late) == queue.state(conn, fenced) == "queued"
    assert queue.complete(conn, first, _effect)  # the late owner, nobody reclaimed
    assert queue.state(conn, late) == "done"
    again = _claim(queue, conn, "c")
    assert (again.job_id, again.token) == (fenced, 2)
    assert not queue.heartbeat(conn, other, LEASE)
    assert not queue.complete(conn, other, _effect)
    assert not queue.fail(conn, other, "late")
    assert queue.heartbeat(conn, again, LEASE)
    assert queue.complete(conn, again, _effect)
    assert queue.state(conn, fenced) == "done"
    assert _effects(conn) == 2
    assert queue.effect_key(other) == queue.effect_key(again) == f"job-{fenced}"


def test_v2_gives_up_at_the_cap_by_failure_and_by_sweep(
    v2: tuple[SqlFileQueue, psycopg.Connection[Any]],
) -> None:
    """The two-statement fail keeps each error and fails the job for good on its third
    attempt; a job whose last attempt expires is failed by the sweep."""
    queue, conn = v2
    failing = queue.enqueue(conn, {})
    for attempt in (1, 2, 3):
        claim = _claim(queue, conn, "a")
        assert claim.token == attempt
        assert queue.fail(conn, claim, f"boom {attempt}")
        assert not queue.fail(conn, claim, "twice")
    assert queue.state(conn, failing) == "failed"
    assert _value(conn, "select count(*) from job_errors where job_id = %s", failing) == 3
    expiring = queue.enqueue(conn, {})
    for _ in (1, 2, 3):
        assert _claim(queue, conn, "a").job_id == expiring
        clock.advance(conn, LEASE + timedelta(seconds=1))
        queue.maintain(conn)
    assert queue.state(conn, expiring) == "failed"
    assert queue.claim(conn, "a", LEASE) is None


def test_several_statements_run_in_one_transaction_and_the_last_answers(
    tmp_path: Path, v2: tuple[SqlFileQueue, psycopg.Connection[Any]]
) -> None:
    """A query's statements run in order; the last one's rows are the answer, and a
    failing statement takes the earlier ones back with it."""
    _, conn = v2
    conn.execute("create table audit (job bigint)")
    enqueue = (
        "-- name: enqueue\n-- Audit, then add.\n"
        "insert into audit values (0);\n"
        "insert into jobs (payload, max_attempts, lease)\n"
        "values (%(payload)s, %(max_attempts)s, %(lease)s) returning id\n"
    )
    complete = (
        "-- name: complete\n-- Audit, then answer; token 1 divides by zero.\n"
        "insert into audit values (%(id)s);\n"
        "select 1 / (%(token)s::int - 1)\n"
    )
    queue = _v2_file(
        tmp_path, _with_block(_with_block(V2_TEXT, "enqueue", enqueue), "complete", complete)
    )
    job = queue.enqueue(conn, {})
    assert _value(conn, "select count(*) from jobs where id = %s", job) == 1
    assert _value(conn, "select count(*) from audit") == 1
    claim = _claim(queue, conn, "a")
    with pytest.raises(psycopg.errors.DivisionByZero):
        queue.complete(conn, claim, _effect)
    assert _value(conn, "select count(*) from audit") == 1  # the audit row went back too
    assert queue.complete(conn, Claim(job, 2, "a"), _effect) is True
    assert _value(conn, "select count(*) from audit") == 2


ACCEPT_MODES = {
    "rows": "select 1 where %(token)s::int = 1",
    "not_null": "select case when %(token)s::int = 1 then 1 end, null::int",
    "first_column_true": "select %(token)s::int = 1",
    "first_column_positive": "select count(*) from jobs where id = %(id)s and %(token)s::int = 1",
    "rowcount": "update jobs set payload = payload where id = %(id)s and %(token)s::int = 1",
}


@pytest.mark.parametrize("mode", sorted(ACCEPT_MODES))
def test_accepted_reads_the_answer_the_file_declares(
    tmp_path: Path, v2: tuple[SqlFileQueue, psycopg.Connection[Any]], mode: str
) -> None:
    """Each accepted= mode accepts the answer of the owning token (1) and refuses the other
    (2): a row or none, an all-NULL row, a boolean, a count row, a changed-row count; the
    effect runs only when accepted."""
    _, conn = v2
    block = f"-- name: complete\n-- Token 1.\n-- leasecheck: accepted={mode}\n{ACCEPT_MODES[mode]}"
    queue = _v2_file(tmp_path, _with_block(V2_TEXT, "complete", block))
    job = queue.enqueue(conn, {})
    assert queue.complete(conn, Claim(job, 2, "a"), _effect) is False
    assert _effects(conn) == 0
    assert queue.complete(conn, Claim(job, 1, "a"), _effect) is True
    assert _effects(conn) == 1


@pytest.mark.parametrize(
    ("mode", "statement", "says"),
    [
        ("first_column_true", "select 1", "answered 1, not a boolean"),
        ("first_column_positive", "select 'yes'", "answered 'yes', not a count"),
        ("rows", "update jobs set payload = payload", "accepted=rowcount"),
    ],
)
def test_an_answer_the_mode_cannot_read_is_named(
    tmp_path: Path, v2: tuple[SqlFileQueue, psycopg.Connection[Any]], mode: str,
    statement: str, says: str,
) -> None:  # fmt: skip
    """An answer of the wrong kind for its accepted= mode is one line saying what to change."""
    _, conn = v2
    block = f"-- name: complete\n-- Wrong.\n-- leasecheck: accepted={mode}\n{statement}\n"
    queue = _v2_file(tmp_path, _with_block(V2_TEXT, "complete", block))
    job = queue.enqueue(conn, {})
    with pytest.raises(SqlFileError, match=re.escape(says)) as caught:
        queue.complete(conn, Claim(job, 1, "a"), _effect)
    assert "\n" not in str(caught.value)


def test_the_lease_reaches_install_enqueue_and_maintain(tmp_path: Path, blank: str) -> None:
    """Queries whose call carries no lease still get the harness's (and max_attempts): an
    install step, enqueue and maintain record what they were given."""
    steps = V2_TEXT[V2_TEXT.index("-- name: install") : V2_TEXT.index("-- name: reset")] + (
        "-- name: install\n-- Step 3: settings, as pg-boss's createQueue keeps them.\n"
        "create table seen (query text, lease interval, max_attempts int);\n"
        "insert into seen values ('install', %(lease)s, %(max_attempts)s)\n\n"
    )
    maintain = (
        "-- name: maintain\n-- Record the lease.\n"
        "insert into seen values ('maintain', %(lease)s, %(max_attempts)s)\n"
    )
    queue = _v2_file(tmp_path, _with_block(_v2_with_install(steps), "maintain", maintain))
    with clock.connect(blank) as conn:
        queue.install(conn)
        job = queue.enqueue(conn, {})
        assert queue.maintain is not None
        queue.maintain(conn)
        seen = conn.execute("select query, lease, max_attempts from seen order by query").fetchall()
        assert seen == [("install", ADAPTER_LEASE, 3), ("maintain", ADAPTER_LEASE, 3)]
        assert _value(conn, "select lease from jobs where id = %s", job) == ADAPTER_LEASE


def test_a_state_outside_the_four_is_named(
    tmp_path: Path, v2: tuple[SqlFileQueue, psycopg.Connection[Any]]
) -> None:
    """A state query that answers the library's own word instead of the contract's is one
    line saying to map it."""
    _, conn = v2
    block = "-- name: state\n-- River's word.\nselect 'available' from jobs where id = %(id)s\n"
    queue = _v2_file(tmp_path, _with_block(V2_TEXT, "state", block))
    job = queue.enqueue(conn, {})
    assert queue.state is not None
    with pytest.raises(SqlFileError, match=r"answered 'available' for job 1; map the queue's"):
        queue.state(conn, job)


@pytest.fixture
def v2_pool(blank: str) -> Iterator[actors.Pool]:
    """Return a connection pool on a database with reference_v2.sql installed."""
    with clock.connect(blank) as c:
        SqlFileQueue(V2).install(c)
    pool = actors.Pool(blank)
    try:
        yield pool
    finally:
        pool.close()


def test_reference_v2_file_survives(v2_pool: actors.Pool) -> None:
    """reference_v2.sql, recovery as the machine's sweep actor and state judged after the
    drain, passes 100 derandomized examples."""
    harness = Harness(queue=SqlFileQueue(V2), pool=v2_pool)
    harness.reset()
    run_state_machine_as_test(
        lambda: LeaseMachine(harness), settings=settings(BUDGET, max_examples=100)
    )


CLAIM_IN_FLIGHT_OVER_A_COMPLETION = [
    Step("start", {"workers": 3}),
    Step("enqueue", {"jobs": 2}),
    Step("preempt", {"after": 1, "hold": 5, "pick": 0}),
    Step("claim", {"how": Take(worker=0, held=False)}),  # w0 takes job1#1; its answer waits
    Step("claim", {"how": Take(worker=0, held=False)}),  # w1 takes job2#1
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),  # w2: job1#2
    Step("complete", {"pick": 1}),  # w2 completes job1#2; then w0's claim answers job1#1
]
"""The `ci` run's program of a claim that took job1 (token 1), answered only after a
later claim of job1 (token 2) was completed."""


def test_a_claim_in_flight_is_no_handout_after_a_completion(v2_pool: actors.Pool) -> None:
    """Its claim was sent before the completion was accepted, so it may have taken the job
    first (its token says it did): said, not judged as no-lost-jobs (which it was, as
    "handed out again after the queue had accepted its completion")."""
    harness = Harness(queue=SqlFileQueue(V2), pool=v2_pool)
    harness.reset()
    story: list[str] = []
    done = replay.replay(harness, CLAIM_IN_FLIGHT_OVER_A_COMPLETION, say=story.append)
    assert done.skipped == [], done.skipped
    assert any("w0 claims job1 (token 1" in line for line in story), story
    said = "it may have taken the job before that completion committed"
    assert any(said in line for line in story), story


def test_an_unfenced_v2_completion_is_killed(tmp_path: Path, v2_pool: actors.Pool) -> None:
    """The v2 path has teeth: reference_v2.sql with its count-row completion unfenced dies."""
    text = V2_TEXT.replace(
        "     where id = %(id)s and attempt = %(token)s\n"
        "       and (status = 'running' or (status = 'queued' and locked_by is not null))\n"
        "    returning id\n)\nselect count(*) from done",
        "     where id = %(id)s\n    returning id\n)\nselect count(*) from done",
    )
    assert text != V2_TEXT
    harness = Harness(queue=_v2_file(tmp_path, text), pool=v2_pool)
    harness.reset()
    with pytest.raises(PropertyViolated) as caught:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    assert caught.value.violation.prop in ("single-completion", "fencing", "no-lost-jobs")


def test_the_documented_example_is_the_tested_file() -> None:
    """docs/sql-queues.md shows reference_v2.sql in full, as the file these tests run."""
    doc = (FILES.parent.parent.parent / "docs" / "sql-queues.md").read_text()
    start = doc.index("```sql\n", doc.index("## A complete example")) + len("```sql\n")
    assert doc[start : doc.index("```", start)] == V2_TEXT


def test_declared_limits_run_through_the_machine(tmp_path: Path, v2_pool: actors.Pool) -> None:
    """reference_v2.sql declaring one job per worker and held completions only runs through
    the machine, which honours both (what it then leaves out is named, not passed)."""
    words = "one_claim_per_worker=true held_transactions=complete"
    queue = _v2_file(tmp_path, V2_TEXT.replace("held_transactions=true", words))
    assert any("held-transactions" in gap for gap in not_checked(queue))
    harness = Harness(queue=queue, pool=v2_pool)
    harness.reset()
    run_state_machine_as_test(
        lambda: LeaseMachine(harness), settings=settings(BUDGET, max_examples=30)
    )


def test_a_v2_sweep_that_ignores_the_lease_is_killed(tmp_path: Path, v2_pool: actors.Pool) -> None:
    """The maintain query is run by the machine: a sweep that requeues running jobs whose
    lease has not ended hands a held job to a second worker, and dies."""
    text = V2_TEXT.replace(
        "where status = 'running' and lease_until < now()", "where status = 'running'"
    )
    assert text != V2_TEXT
    harness = Harness(queue=_v2_file(tmp_path, text), pool=v2_pool)
    harness.reset()
    with pytest.raises(PropertyViolated) as caught:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    assert caught.value.violation.prop in ("exclusive-lease", "owner-progress"), str(
        caught.value.violation
    )


def test_check_names_a_bad_sql_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`leasecheck check --sql` loads the file before starting pytest: a bad file is the
    file's own line, exit 2, and no run."""
    path = _broken(tmp_path, V2_TEXT.replace("held_transactions=true", "held_transactions=x"))
    assert cli.main(["check", "--sql", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"leasecheck check: {path}: held_transactions=x: give true, false or a comma list "
        "(no spaces) of claim, heartbeat, complete, fail\n"
    )


def test_a_late_owner_refused_after_a_paused_claim_took_the_job_is_no_violation(
    v2_pool: actors.Pool,
) -> None:
    """The claim's statement ran and committed (autocommit) but its answer waits at its
    gate when the late owner's completion is refused: the job was handed out again, only
    not answered yet. The judge waits for the claim's answer, which names the job; found
    by the matrix's reference_v2.sql column, a false late-owner before the judge waited."""
    harness = Harness(queue=SqlFileQueue(V2), pool=v2_pool)
    harness.reset()

    def asleep(then: str) -> Step:
        return Step("asleep", {"how": Stall(worker=0, alone=False, then=then)})

    steps = [
        Step("start", {"workers": 2}),
        Step("claim", {"how": Take(worker=0, held=False)}),
        asleep("heartbeat"),
        asleep("complete"),
        Step("preempt", {"after": 1, "pick": 0}),
        asleep("complete"),
    ]
    done = replay.replay(harness, steps)
    assert len(done.ran) == len(steps), done.skipped
    assert harness.coverage["call paused between its statements"] >= 1
