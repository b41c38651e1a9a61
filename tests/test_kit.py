"""The adapter author's kit (`leasecheck.kit`): the reference passes its tests, and they
fail where an adapter is wrong (a declaration that misstates the library, a property
given up that does not exist, a violation the adapter did not give up)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import mutants
from leasecheck import kit
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.properties import PropertyViolated

adapter_dsn, pool, conn = kit.fixtures(ReferenceQueue, "kit")


class TestTheReference(kit.AdapterTests):
    queue = ReferenceQueue
    examples = 25


class _RunsTheEffectUndeclared(ReferenceQueue):
    transactional_effects = False  # wrong: its complete() runs the effect in its transaction


def test_an_effect_declared_outside_but_run_inside_fails_the_round_trip(
    conn: psycopg.Connection[Any], adapter_dsn: str
) -> None:
    class Misdeclared(kit.AdapterTests):
        queue = _RunsTheEffectUndeclared

    with pytest.raises(AssertionError, match=r"complete\(\) ran the effect"):
        Misdeclared().test_one_job_goes_round_once(conn, adapter_dsn)


def test_a_property_given_up_must_exist() -> None:
    class Misspelt(kit.AdapterTests):
        queue = ReferenceQueue
        given_up = frozenset({"fenceing"})

    with pytest.raises(AssertionError, match="fenceing"):
        Misspelt().test_the_queue_meets_the_contract()


def test_a_violation_not_given_up_fails_the_search(pool: actors.Pool) -> None:
    """naive completes without fencing and runs its effect after the commit: giving up
    fencing alone does not excuse what the search then finds."""

    class GivesUpTooLittle(kit.AdapterTests):
        queue = staticmethod(lambda: contract.load(mutants.ALL["naive"]))
        given_up = frozenset({"fencing"})

    with pytest.raises(PropertyViolated) as caught:
        GivesUpTooLittle().test_every_other_property_holds(pool)
    assert caught.value.violation.prop != "fencing"


def test_a_subclass_that_names_no_queue_is_told_how_in_one_line() -> None:
    class Nameless(kit.AdapterTests):
        pass

    with pytest.raises(TypeError, match=r"Nameless names no queue: set `queue = MyLibQueue`"):
        Nameless().test_the_queue_meets_the_contract()
