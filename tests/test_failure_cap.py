"""A cap on failure reports (`max_failures`), as dramatiq, pgqueuer, chancy and django-q2
cap retries: retry-cap and no-lost-jobs judge it by that promise.

The queue under test is the reference with its cap moved from claims to accepted
failure reports (`mutants._failure_capped`); its two mutants give a job up one report
late, or count deliveries as failures. They have a schema of their own, so they run on
a database of their own here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import mutants
from leasecheck.stateful import contract, opening
from leasecheck.stateful.contract import ContractError
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.exhaustive import layer
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from mutants._failure_capped import FailureCapped
from tests.fixtures import derandomized, pool_on_own_database

W0 = Take(worker=0, held=False)
THREE_FAILURES = [
    Step("start", {"workers": 2}),
    *[Step(rule, args) for _ in range(3) for rule, args in (("claim", {"how": W0}),
                                                           ("fail", {"pick": 0}))],
    Step("claim", {"how": W0}),
]  # fmt: skip
"""Three claims, each failed and the report accepted, then one more claim."""
TWO_EXPIRIES_ONE_FAILURE = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": W0}),
    Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),
    Step("claim", {"how": W0}),
    Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),
    Step("claim", {"how": W0}),
    Step("fail", {"pick": 2}),  # w0's third claim, the one that owns the job
]
"""Two leases run out (no failure report), then the third claim fails once."""


@pytest.fixture(scope="module")
def pool(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[actors.Pool]:
    """Return a pool on a database of its own with the failure-capped queue's schema."""
    label = f"{leasecheck_worker_label}_failcap"
    with pool_on_own_database(leasecheck_server_dsn, label, FailureCapped()) as pool:
        yield pool


def _harness(spec: str, pool: actors.Pool) -> Harness:
    harness = Harness(queue=contract.load(spec), pool=pool)
    harness.reset()
    return harness


def test_a_cap_on_failures_is_judged_not_given_up() -> None:
    """With `max_failures`, retry-cap is checked though claims are not capped; with
    neither cap it is named as not checked."""
    assert not any(g.startswith("retry-cap") for g in contract.not_checked(FailureCapped()))
    uncapped = FailureCapped()
    uncapped.max_failures = None  # type: ignore[assignment]
    (gap,) = [g for g in contract.not_checked(uncapped) if g.startswith("retry-cap")]
    assert "no max_failures" in gap


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_a_malformed_max_failures_is_one_line_that_says_what_to_declare(bad: object) -> None:
    queue = FailureCapped()
    queue.max_failures = bad  # type: ignore[assignment]
    with pytest.raises(ContractError, match="declare a whole number of at least 1"):
        contract.capabilities(queue)


def test_the_clean_queue_keeps_every_property_over_both_programs(pool: actors.Pool) -> None:
    """Its third accepted failure report gives the job up, so the fourth claim finds
    nothing; two expiries do not count, so the third claim's failure re-queues the job."""
    spec = "mutants._failure_capped:FailureCapped"
    for steps in (THREE_FAILURES, TWO_EXPIRIES_ONE_FAILURE):
        done = replay.replay(_harness(spec, pool), steps)
        assert done.skipped == [], done.skipped


def test_the_clean_queue_holds_over_a_search_and_the_first_scope(pool: actors.Pool) -> None:
    """No claim past the third failure and no job given up early, in 60 derandomized
    examples and the first small scope (one worker's life: claims, failures, crashes)."""
    harness = _harness("mutants._failure_capped:FailureCapped", pool)
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(60))
    scope, schedules = layer.SCOPES[0]
    done = explore(harness, scope, None, schedules=schedules)
    assert done.violation is None, done.violation
    assert done.complete, done


@pytest.mark.parametrize(
    ("name", "steps", "prop", "words"),
    [
        (
            "failure-cap-late",
            THREE_FAILURES,
            "retry-cap",
            "after the queue had accepted 3 failure reports; the queue promises to give a "
            "job up at 3",
        ),
        (
            "failure-cap-counts-claims",
            TWO_EXPIRIES_ONE_FAILURE,
            "no-lost-jobs",
            "failed for good after 1 accepted failure reports of the 3 it was promised",
        ),
    ],
)
def test_each_mutant_breaks_its_property_on_its_program(
    name: str, steps: list[Step], prop: str, words: str, pool: actors.Pool
) -> None:
    with pytest.raises(PropertyViolated) as error:
        replay.replay(_harness(mutants.FAILURE_CAPPED[name], pool), steps)
    assert error.value.violation.prop == prop
    assert words in str(error.value)


def test_giving_up_late_dies_in_the_first_small_scope(pool: actors.Pool) -> None:
    """A property run meets it on every run: the first scope holds its program (three
    claims each failed; the drain's claim is the fourth)."""
    harness = _harness(mutants.FAILURE_CAPPED["failure-cap-late"], pool)
    scope, schedules = layer.SCOPES[0]
    done = explore(harness, scope, None, schedules=schedules)
    assert done.violation is not None, f"survived {scope.where()}"
    assert done.violation.violation.prop == "retry-cap", done.violation


def test_the_opening_tells_both_mutants_and_holds_on_the_clean_queue(pool: actors.Pool) -> None:
    """The opening's two stories for a cap on failures: every property run plays them
    (cheaply), and each mutant breaks its property in one. (The search alone met the
    one that counts deliveries at example 213 of the kill budget's 250.)"""
    clean = _harness("mutants._failure_capped:FailureCapped", pool)
    opening.play(clean)
    assert clean.played == len(opening.stories(clean.caps, clean.queue.max_attempts))
    for name, prop in (
        ("failure-cap-late", "retry-cap"),
        ("failure-cap-counts-claims", "no-lost-jobs"),
    ):
        with pytest.raises(PropertyViolated) as error:
            opening.play(_harness(mutants.FAILURE_CAPPED[name], pool))
        assert error.value.violation.prop == prop, (name, error.value.violation)
