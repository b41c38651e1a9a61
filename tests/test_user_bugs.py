"""The three properties "for what users call a bug", each on a replayed program.

Each program runs through the driver against real PostgreSQL, on its mutant (which
must break the property) and on the reference (which must keep every property).
done-effect: a completion paused after it committed `done`, then its worker crashes.
distinct-keys: two jobs handed out in one simulated minute. no-hidden-claims: a
claim that marks two jobs running, and the IN-subquery claim that does so only once
the `replan` move analyzed the tables while they were tiny.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mutants
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from leasecheck.stateful.verdict.judge import rejudge
from tests.fixtures import REFERENCE

START = Step("start", {"workers": 2})
CLAIM = Step("claim", {"how": Take(worker=0, held=False)})
CLAIM_OTHER = Step("claim", {"how": Take(worker=1, held=False)})
ACK_THEN_CRASH = [
    START,
    CLAIM,
    Step("preempt", {"pick": 0, "after": 1}),  # w0's next call pauses after statement 1
    Step("complete", {"pick": 0}),  # done committed; the effect's transaction not begun
    Step("crash", {"pick": 0}),
]
SAME_MINUTE = [START, Step("enqueue", {"jobs": 1}), CLAIM, CLAIM_OTHER]
TWO_QUEUED = [START, Step("enqueue", {"jobs": 1}), CLAIM]
REPLANNED = [START, Step("replan", {"grow": 1}), CLAIM]
PROGRAMS = {
    "ack-then-work": ("done-effect", ACK_THEN_CRASH),
    "minute-key": ("distinct-keys", SAME_MINUTE),
    "claims-two": ("no-hidden-claims", TWO_QUEUED),
    "in-subquery-claim": ("no-hidden-claims", REPLANNED),
}


@pytest.fixture
def pool(reference_pool: actors.Pool) -> actors.Pool:
    return reference_pool


def _harness(spec: str, pool: actors.Pool, replans: bool | None = None) -> Harness:
    harness = Harness(queue=contract.load(spec), pool=pool, spec=spec, replans=replans)
    harness.reset()
    return harness


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_mutant_breaks_its_property(name: str, pool: actors.Pool, tmp_path: Path) -> None:
    """Its program breaks the property, and the saved facts are judged again to it."""
    prop, steps = PROGRAMS[name]
    harness = _harness(mutants.ALL[name], pool)
    with pytest.raises(PropertyViolated) as error:
        replay.replay(harness, steps)
    assert error.value.violation.prop == prop, error.value.violation
    (path,) = [p for p in harness.recorder.write(tmp_path, name, "") if p.suffix == ".json"]
    saved = json.loads(path.read_text())["judge"]
    again = [str(v) for v in rejudge(saved).oracle.ledger.violations]
    assert str(error.value.violation) in again


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_reference_keeps_every_property_over_it(name: str, pool: actors.Pool) -> None:
    _, steps = PROGRAMS[name]
    done = replay.replay(_harness(REFERENCE, pool), steps)
    assert done.skipped == [], done.skipped
    assert len(done.ran) == len(steps)


def test_only_the_replan_reaches_the_in_subquery_claim(pool: actors.Pool) -> None:
    """The same jobs and claim without the replan: the pick runs once, one job is taken."""
    spec = mutants.ALL["in-subquery-claim"]
    steps = [START, Step("enqueue", {"jobs": 1}), CLAIM, CLAIM_OTHER]
    done = replay.replay(_harness(spec, pool), steps)
    assert done.skipped == [] and len(done.ran) == len(steps)


def test_the_reset_puts_the_statistics_back(pool: actors.Pool) -> None:
    """After an example that replanned, the next one meets a fresh example's plans."""
    spec = mutants.ALL["in-subquery-claim"]
    stats = (
        "select relpages, reltuples, (select count(*) from pg_stats where tablename = 'jobs')"
        " from pg_class where relname = 'jobs'"
    )
    before = pool.monitor.execute(stats).fetchone()
    with pytest.raises(PropertyViolated):
        replay.replay(_harness(spec, pool), REPLANNED)
    assert pool.monitor.execute(stats).fetchone() == before
    steps = [START, Step("enqueue", {"jobs": 1}), CLAIM]
    done = replay.replay(_harness(spec, pool), steps)
    assert len(done.ran) == len(steps)


def test_without_the_move_it_is_not_offered(pool: actors.Pool) -> None:
    """A harness that does not replan skips the step (the kill test's control)."""
    done = replay.replay(_harness(mutants.ALL["in-subquery-claim"], pool, False), REPLANNED)
    assert done.skipped == ["step 2 state.replan(grow=1): its precondition does not hold"]


def test_a_run_starts_from_no_column_statistics(pool: actors.Pool) -> None:
    """Column statistics an earlier ANALYZE left on the queue's tables are cleared at the
    run's first reset: a replan's undo cannot put them back, so otherwise the examples
    after a run's first replan met other plans than those before it (in full runs only,
    where an earlier test had analyzed the shared database: Hypothesis then said the
    same choices drew differently)."""
    monitor = pool.monitor
    monitor.execute("insert into jobs (payload) values ('{}'), ('{}')")
    monitor.execute("analyze jobs")
    columns = "select count(*) from pg_stats where schemaname = 'public' and tablename = 'jobs'"
    assert monitor.execute(columns).fetchone() != (0,), "the premise: ANALYZE left statistics"
    harness = _harness(REFERENCE, pool)
    if not harness.can_replan():
        pytest.skip("this server cannot clear statistics (PostgreSQL 18+): no replan move")
    assert monitor.execute(columns).fetchone() == (0,)
