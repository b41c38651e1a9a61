"""A failure's saved program replays to the same violation, step by step, without Hypothesis."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest

import mutants
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from tests.fixtures import REFERENCE, derandomized

sys.path.insert(0, str(Path(__file__).with_name("data") / "myqueue"))  # a correct queue

FIND = derandomized(1000)


@pytest.fixture
def pool(reference_pool: actors.Pool) -> actors.Pool:
    """Return a connection pool on the database with the reference schema."""
    return reference_pool


def _harness(spec: str, pool: actors.Pool) -> Harness:
    harness = Harness(queue=contract.load(spec), pool=pool, spec=spec)
    harness.reset()
    return harness


@pytest.mark.parametrize("name", ["naive", "attempt-key", "unfenced-fail"])
def test_a_saved_failure_replays_to_the_same_violation(
    name: str, pool: actors.Pool, tmp_path: Path
) -> None:
    """Found by Hypothesis, saved, read back and replayed on the same queue: same property."""
    spec = mutants.ALL[name]
    found = _harness(spec, pool)
    with pytest.raises(PropertyViolated) as error:
        run_state_machine_as_test(lambda: LeaseMachine(found), settings=FIND)
    prop = error.value.violation.prop
    (path,) = [p for p in found.recorder.write(tmp_path, name, spec) if p.suffix == ".json"]
    saved = replay.load(path)
    assert saved.queue_spec == spec and saved.prop == prop
    with pytest.raises(PropertyViolated) as again:
        replay.replay(_harness(saved.queue_spec, pool), saved.steps)
    assert again.value.violation.prop == prop


def test_the_reference_holds_over_a_mutants_program(pool: actors.Pool, tmp_path: Path) -> None:
    """The naive queue's counterexample, replayed on the reference, breaks nothing."""
    found = _harness(mutants.ALL["naive"], pool)
    with pytest.raises(PropertyViolated):
        run_state_machine_as_test(lambda: LeaseMachine(found), settings=FIND)
    (path,) = [p for p in found.recorder.write(tmp_path, "naive", "") if p.suffix == ".json"]
    done = replay.replay(_harness(REFERENCE, pool), replay.load(path).steps)
    assert done.ran and not done.skipped


def test_a_step_whose_precondition_fails_is_skipped_not_forced(pool: actors.Pool) -> None:
    """Completing with nothing claimed cannot apply: the step is skipped and said so."""
    steps = [Step("start", {"workers": 2}), Step("complete", {"pick": 0})]
    done = replay.replay(_harness(REFERENCE, pool), steps)
    assert [str(s) for s in done.ran] == ["state.start(workers=2)"]
    assert done.skipped == ["step 2 state.complete(pick=0): its precondition does not hold"]


def test_an_unknown_rule_fails_before_any_step(pool: actors.Pool) -> None:
    """A program from a newer leasecheck names the rule this one lacks."""
    with pytest.raises(ValueError, match="'teleport', which is not a rule"):
        replay.replay(_harness(REFERENCE, pool), [Step("teleport", {})])


HARNESS_CANCEL = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=1, held=False)}),  # w1: job1, token 1
    Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),  # its lease runs out
    Step("open_transaction", {"pick": 0}),  # w0 begins
    Step("claim", {"how": Take(worker=0, held=False)}),  # w0 takes job1 in it: row locked
    Step("enqueue", {"jobs": 1}),
    Step("claim", {"how": Take(worker=1, held=False)}),  # w1: job2, which it owns
    Step("time_passes", {"to": "second"}),  # w1's overdue heartbeat of job1 waits on the row
    Step("open_transaction", {"pick": 0}),  # w1 begins
    Step("fail", {"pick": 1}),  # w1's stale job1 would wait too: the harness cancels it
    Step("complete", {"pick": 1}),  # w1 completes job2 (autocommit: its transaction is over)
]


def test_a_call_the_harness_cancelled_is_never_held_against_the_queue(
    pool: actors.Pool,
) -> None:
    """The harness cancels a second lock waiter inside a held transaction; the owner's next
    call must not run into the aborted transaction and read as a refusal."""
    done = replay.replay(_harness(REFERENCE, pool), HARNESS_CANCEL)
    assert done.skipped == [], done.skipped
    assert [s.rule for s in done.ran] == [s.rule for s in HARNESS_CANCEL]


# Found by `python -m bench.time_to_detect --queue myqueue.queue:Queue`, seed 19: w1, inside
# a transaction it holds open, heartbeats job2 at 90 s; its heartbeat thread's own beat
# then waits on that transaction's row lock until w1 commits at 120 s, when job2's last
# lease has run out and w1's own claim gave it up at its cap. The queue refused a late
# owner rightly; the judge used to date the refusal by when the call was sent (90 s) and
# blamed the queue for refusing a current owner.
WAITED_PAST_ITS_LEASE = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("crash", {"pick": 0}),
    Step("enqueue", {"jobs": 1}),
    Step("enqueue", {"jobs": 1}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("claim", {"how": Take(worker=0, held=True)}),
    Step("fail", {"pick": 0}),
    Step("time_passes", {"to": "lease-end"}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("close_transaction", {"commit": True, "pick": 0}),
    Step("open_transaction", {"pick": 0}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
    Step("open_transaction", {"pick": 0}),
    Step("asleep", {"how": Stall(worker=1, alone=True, then="heartbeat")}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
]


def test_a_refusal_is_judged_when_it_was_answered(pool: actors.Pool, reference_dsn: str) -> None:
    """A heartbeat that waited on a lock past its lease end, refused because the lease ran
    out meanwhile, is a late owner's refusal, not the current owner's (myqueue, correct)."""
    queue = contract.load("myqueue.queue:Queue")
    with psycopg.connect(reference_dsn, autocommit=True) as conn:
        if conn.execute("select to_regclass('mq_tasks')").fetchone() == (None,):
            queue.install(conn)
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    done = replay.replay(harness, WAITED_PAST_ITS_LEASE)
    assert done.skipped == [], done.skipped


def test_a_failure_found_under_an_excuse_replays_as_it_was_judged(
    pool: actors.Pool, tmp_path: Path
) -> None:
    """The file records the properties its run excused, and a replay excuses them too: it
    breaks the property the run found, not the first one the run had set aside."""
    spec = mutants.ALL["naive"]
    first = _harness(spec, pool)
    with pytest.raises(PropertyViolated) as error:
        run_state_machine_as_test(lambda: LeaseMachine(first), settings=FIND)
    excused = frozenset({error.value.violation.prop})
    found = Harness(queue=contract.load(spec), pool=pool, spec=spec, excused=excused)
    found.reset()
    with pytest.raises(PropertyViolated) as error:
        run_state_machine_as_test(lambda: LeaseMachine(found), settings=FIND)
    prop = error.value.violation.prop
    assert prop not in excused
    (path,) = [
        p for p in found.recorder.write(tmp_path, "naive", spec, excused) if p.suffix == ".json"
    ]
    saved = replay.load(path)
    assert saved.excused == excused
    again = Harness(queue=contract.load(spec), pool=pool, spec=spec, excused=saved.excused)
    again.reset()
    with pytest.raises(PropertyViolated) as replayed:
        replay.replay(again, saved.steps)
    assert replayed.value.violation.prop == prop


def test_an_excuse_that_names_no_property_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "hand.json"
    path.write_text('{"format": 1, "program": [], "excused": ["fencng"]}')
    with pytest.raises(ValueError, match=r'"excused" must list property ids .* not .fencng.'):
        replay.load(path)
