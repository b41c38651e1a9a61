"""Every answer is judged the same way, for every call kind: an exception is the queue's
"no" (quoted in the headline), a wrong-typed answer is a contract error naming the method.

Each case replays a short rule program on the reference queue with one call broken in
one of three ways: it raises, its SQL errors, or it answers a value of the wrong type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from leasecheck import suite
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import NO_LOST_JOBS, OWNER_PROGRESS, PropertyViolated
from leasecheck.stateful.story import replay

START = [Step("start", {"workers": 2}), Step("claim", {"how": Take(worker=0, held=False)})]
PROGRAMS = {
    "heartbeat": [*START, Step("heartbeat", {"pick": 0})],
    "beat": [*START, Step("time_passes", {"to": "beat"})],
    "complete": [*START, Step("complete", {"pick": 0})],
    "fail": [*START, Step("fail", {"pick": 0})],
    "complete_many": [*START, Step("complete_batch", {"pick": 0, "size": 1})],
    "claim": [Step("start", {"workers": 2}), Step("claim", {"how": Take(worker=0, held=False)})],
}
"""A program per call kind that sends that call to the current owner (or, for claim, asks)."""

METHOD = {"beat": "heartbeat"}


def _raises(conn: Any) -> Any:
    raise RuntimeError("the renewal service is down")


def _bad_sql(conn: Any) -> Any:
    return conn.execute("select lease_untill from jobs").fetchone()  # UndefinedColumn


BREAKS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "raises": (_raises, "RuntimeError: the renewal service is down"),
    "bad-sql": (_bad_sql, 'UndefinedColumn: column "lease_untill" does not exist'),
}


def _broken(method: str, breaks: Callable[[Any], Any]) -> contract.Queue:
    """Return the reference queue with `method` replaced by `breaks(conn)`."""

    def call(self: Any, conn: Any, *args: Any) -> Any:
        return breaks(conn)

    broken: type[ReferenceQueue] = type(
        f"Broken_{method}", (ReferenceQueue,), {"name": "broken", method: call}
    )
    return broken()


def _replay(queue: contract.Queue, pool: actors.Pool, steps: list[Step]) -> replay.Replayed:
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    return replay.replay(harness, steps)


@pytest.mark.parametrize("how", sorted(BREAKS))
@pytest.mark.parametrize("kind", ["heartbeat", "beat", "complete", "fail", "complete_many"])
def test_an_exception_is_the_owners_refusal_and_the_headline_quotes_it(
    kind: str, how: str, reference_pool: actors.Pool
) -> None:
    """The current owner's call raises (or its SQL errors): owner-progress, quoting it."""
    breaks, quote = BREAKS[how]
    queue = _broken(METHOD.get(kind, kind), breaks)
    with pytest.raises(PropertyViolated) as caught:
        _replay(queue, reference_pool, PROGRAMS[kind])
    violation = caught.value.violation
    assert violation.prop == OWNER_PROGRESS, violation
    assert f"refused (it raised {quote})" in violation.message
    assert violation.grants == ("w0:job1#1",) and violation.jobs == ("job1",)


@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_claim_that_raises_hands_out_nothing_and_the_lost_job_story_quotes_it(
    how: str, reference_pool: actors.Pool
) -> None:
    """Every claim raises: nothing is ever handed out, and no-lost-jobs says why."""
    breaks, quote = BREAKS[how]
    with pytest.raises(PropertyViolated) as caught:
        _replay(_broken("claim", breaks), reference_pool, PROGRAMS["claim"])
    violation = caught.value.violation
    assert violation.prop == NO_LOST_JOBS
    assert any(line.startswith("claim() raised") and quote in line for line in violation.evidence)


def test_a_batch_claim_that_raises_is_nothing_handed_out(reference_pool: actors.Pool) -> None:
    """claim_many's exception hands out nothing; the single claims of the drain still run,
    so every property holds, and the history keeps the exception."""
    queue = _broken("claim_many", _raises)
    steps = [Step("start", {"workers": 2}), Step("claim_batch", {"pick": 0, "size": 2})]
    done = _replay(queue, reference_pool, steps)
    assert [s.rule for s in done.ran] == ["start", "claim_batch"]


WRONG = {
    "heartbeat": (None, "heartbeat() returned None; return True or False"),
    "complete": (1, "complete() returned 1; return True or False"),
    "fail": ("ok", "fail() returned 'ok'; return True or False"),
    "claim": ({"job": 1}, "claim() returned {'job': 1}; return None, an object with job_id"),
    "complete_many": ([1], "complete_many() returned 1; return True or False"),
}


@pytest.mark.parametrize("kind", sorted(WRONG))
def test_a_wrong_typed_answer_is_a_contract_error_naming_the_method(
    kind: str, reference_pool: actors.Pool
) -> None:
    """None where a bool is due, a dict for a claim: not a verdict, a contract error."""
    value, said = WRONG[kind]
    queue = _broken(kind, lambda conn: value)
    with pytest.raises(contract.ContractError) as caught:
        _replay(queue, reference_pool, PROGRAMS[kind])
    assert str(caught.value).startswith(f"broken: {said}"), caught.value


def test_a_state_that_raises_is_a_contract_error(reference_pool: actors.Pool) -> None:
    """state() is how the queue shows a job; if it cannot, nothing can be judged from it."""
    queue = _broken("state", _bad_sql)
    with pytest.raises(contract.ContractError, match=r"^broken: state\(\) raised UndefinedColumn"):
        _replay(queue, reference_pool, PROGRAMS["fail"])


class _Claimed(ReferenceQueue):
    """Answers `claimed` for a queued job: outside the contract's four states."""

    name = "claimed"

    def state(self, conn: Any, job_id: Any) -> str:
        answer = super().state(conn, job_id)
        return "claimed" if answer == "queued" else answer


def test_a_contract_error_met_while_judging_is_told_as_a_story(
    reference_pool: actors.Pool, tmp_path: Any
) -> None:
    """A `state()` answer read to judge a step (not in a step) still gets its timeline and
    program, never an earlier example's story or Hypothesis's raw notes."""
    harness = Harness(queue=_Claimed(), pool=reference_pool)
    harness.reset()
    steps = [
        Step("start", {"workers": 2}),
        Step("enqueue", {"jobs": 1}),
        Step("claim", {"how": Take(worker=0, held=False)}),  # then job2's state is read
    ]

    def run() -> None:
        replay.replay(harness, steps)

    with pytest.raises(pytest.fail.Exception) as failed:
        suite._reporting_failures(harness, tmp_path, run)
    story = str(failed.value.msg).splitlines()
    assert "state() answered 'claimed'" in story[0], story
    assert "timeline (simulated time; one lane per worker):" in story
    assert "Failing program, 3 steps (as Hypothesis shrank it):" in story
