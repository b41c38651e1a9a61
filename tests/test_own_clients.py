"""A queue that opens its own connections (`contract.Clients`): each worker's client is
handed a DSN of its own through the stepping proxy, and is paused, judged and crashed
there as the harness's own sessions are.

The race these tests hunt lies inside one call of the library's, between two of its
round trips on a connection the harness never sees: `TwoStepClaim` reads a job in one
statement and marks it in the next. Only a pause on the wire between the two shows it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.exhaustive import audit, layer
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Take
from leasecheck.stateful.properties import SINGLE_COMPLETION
from tests.fixtures import derandomized, pool_on_own_database
from tests.own_clients import Orphaned, OwnClientQueue, Stubborn, TwoStepClaim


@pytest.fixture(scope="module")
def pool(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[actors.Pool]:
    label = f"{leasecheck_worker_label}_clients"
    with pool_on_own_database(leasecheck_server_dsn, label, OwnClientQueue()) as pool:
        yield pool


THE_TAKEOVERS = 2
"""The small scope of every property run where two workers take one job over."""


def test_a_race_inside_one_call_dies_in_the_opening(pool: actors.Pool) -> None:
    """The opening's small scope of the takeovers kills it, as it does under `ci`: a
    claim paused on the wire after its read, the job completed meanwhile, then taken."""
    scope, schedules = layer.SCOPES[THE_TAKEOVERS]
    done = explore(Harness(queue=TwoStepClaim(), pool=pool), scope, None, schedules=schedules)
    assert done.violation is not None, done.said(scope)
    assert done.violation.violation.prop == SINGLE_COMPLETION
    assert "preempt" in [s.rule for s in done.counterexample]
    assert pool.proxy is not None and pool.proxy.errors == []


def test_without_a_pause_inside_the_call_the_race_is_not_met(pool: actors.Pool) -> None:
    """The teeth of the test above: the same moves with no preemption search whole and
    find nothing, so it is the pause on the library's own connection that finds it."""
    scope = Scope(2, 1, 3, 0, frozenset({"claim", "asleep", "complete", "fail"}))
    done = explore(Harness(queue=TwoStepClaim(), pool=pool), scope, None, schedules=3000)
    assert done.violation is None and done.complete, done.said(scope)


def test_programs_that_reach_one_state_answer_alike_on_a_queues_own_clients(
    pool: actors.Pool,
) -> None:
    """The explorer's state takes in each client session (its round trips on the wire,
    where its call is paused): twins on the queue's own clients, continued with the
    same moves, answer alike, with a race inside one call to be met or not."""
    harness = Harness(queue=TwoStepClaim(), pool=pool)
    scope = Scope(workers=2, jobs=1, moves=2, preemptions=1)
    checked, parted = audit.audit(harness, scope, pairs=15, continuations=2, length=4)
    assert checked == 15
    assert not parted, "\n".join(str(p) for p in parted)


def test_the_clean_client_keeps_the_contract(pool: actors.Pool) -> None:
    harness = Harness(queue=OwnClientQueue(), pool=pool)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(15))


def test_a_crash_ends_every_connection_of_the_client(pool: actors.Pool) -> None:
    """A crashed worker's client is dead as its process would be: its backends are gone
    and it cannot connect again (its endpoint was dropped)."""
    harness = Harness(queue=OwnClientQueue(), pool=pool)
    harness.reset()
    d = Driver(harness)
    try:
        d.start(workers=1)
        d.claim(how=Take(0, False))
        w = d.core.workers[0]
        client: Any = w.main.client
        pids = w.main.pids - {w.main.pid}
        assert client is not None and len(pids) == 1
        d.crash(pick=0)
        gone = "select count(*) from pg_stat_activity where pid = any(%s)"
        assert pool.monitor.execute(gone, (sorted(pids),)).fetchone() == (0,)
        with pytest.raises(psycopg.OperationalError):
            client.connection().execute("select 1")
    finally:
        d.teardown()


@contextlib.contextmanager
def one_claim(server: str, label: str, queue: OwnClientQueue) -> Iterator[Driver]:
    """A run of `queue` on a database of its own, one worker holding one claim."""
    with pool_on_own_database(server, label, queue) as pool:
        harness = Harness(queue=queue, pool=pool)
        harness.reset()
        d = Driver(harness)
        try:
            d.start(workers=1)
            d.claim(how=Take(0, False))
            yield d
        finally:
            d.teardown()


@pytest.mark.parametrize("deaf", [False, True], ids=["closed", "ended-in-its-thread"])
def test_a_crashed_clients_call_that_goes_on_is_lost_not_hung(
    leasecheck_server_dsn: str, leasecheck_worker_label: str, deaf: bool
) -> None:
    """A crash mid-call: the library retries into the dropped address. The harness closes
    the client (or, when the loop ignores that, ends it in its thread): the call is lost,
    the harness's doing, and the run goes on (no CallHung, no contract breach)."""
    label = f"{leasecheck_worker_label}_stubborn"
    with one_claim(leasecheck_server_dsn, label, Stubborn(deaf=deaf)) as d:
        d.preempt(pick=0, after=1)
        d.complete(pick=0)
        assert d.core.parked(), "the completion did not pause inside its transaction"
        d.crash(pick=0)
        ends = [e for e in d.core.history.events if e.op == "complete"]
        assert [e.kind for e in ends][-1:] == ["info"], ends
        assert "ok" not in [e.kind for e in ends]


def test_a_harness_fault_stops_the_run_and_is_never_an_answer(
    leasecheck_server_dsn: str, leasecheck_worker_label: str
) -> None:
    """What carries a client's calls died (a Node.js host): the run stops there, and the
    call is not read as the queue's refusal, which would judge the current owner refused."""
    label = f"{leasecheck_worker_label}_orphaned"
    with one_claim(leasecheck_server_dsn, label, Orphaned()) as d:
        with pytest.raises(contract.HarnessFault, match="host process exited"):
            d.complete(pick=0)
        kinds = [e.kind for e in d.core.history.events if e.op == "complete"]
        assert "fail" not in kinds and "ok" not in kinds, kinds


def test_a_connecting_queue_declares_no_held_transactions() -> None:
    class Held(OwnClientQueue):
        held_transactions = True

    with pytest.raises(contract.ContractError, match="held_transactions = False"):
        contract.capabilities(Held())


def test_a_connecting_queue_has_a_disconnect() -> None:
    class Leaky(OwnClientQueue):
        disconnect = None  # type: ignore[assignment]

    with pytest.raises(contract.ContractError, match="no disconnect"):
        contract.clients(Leaky())
