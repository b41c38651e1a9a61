"""The machine honours what a queue declares it cannot do: one job per worker at a time,
only some calls inside a transaction the harness holds open, a heartbeat that answers
nothing.

The queue under test is the reference with a recorder that notes every time the
machine asks it for something it declared impossible. (It notes rather than raises:
the machine records a call's exception as the queue's answer.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.contract import Claim, Effect
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.moves import Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.story import replay
from tests.fixtures import derandomized

BUDGET = derandomized(60)
"""Undeclared, the machine does both things the recorder watches for within these 60
examples (`test_without_the_declarations_the_recorder_sees_both`; it did within 50 too):
so declared, it had as many chances to do them, and did not."""
HELD_COMPLETION = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("open_transaction", {"pick": 0}),
    Step("complete", {"pick": 0}),
    Step("close_transaction", {"pick": 0, "commit": True}),
]
"""A completion inside a transaction the harness holds, which the declaration allows.
(The search's own count of them moves with every change to the machine: 16, 10, 2, or
none in 150 examples; this program says it for sure.)"""
IN_TRANSACTION = psycopg.pq.TransactionStatus.INTRANS


class OneAtATime(ReferenceQueue):
    """One job per worker; only completions may run in a held transaction."""

    name = "one-at-a-time"
    one_claim_per_worker = True
    held_calls = frozenset({"complete"})

    def __init__(self) -> None:
        super().__init__()
        self.holding: dict[str, Claim] = {}
        self.completed_in_transaction = 0
        self.broken: list[str] = []

    def _outside(self, conn: Connection[Any], call: str) -> None:
        if conn.info.transaction_status == IN_TRANSACTION:
            self.broken.append(f"{call} in a held transaction")

    def reset(self, conn: Connection[Any]) -> None:
        self.holding.clear()
        super().reset(conn)

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        self._outside(conn, "claim")
        if worker in self.holding:
            self.broken.append(f"{worker} asked for a second job")
        claim = super().claim(conn, worker, lease)
        if claim is not None and worker != "drain":
            self.holding[worker] = claim
        return claim

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        self._outside(conn, "heartbeat")
        return super().heartbeat(conn, claim, lease)

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        self.completed_in_transaction += conn.info.transaction_status == IN_TRANSACTION
        self.holding.pop(claim.worker, None)
        return super().complete(conn, claim, effect)

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        self._outside(conn, "fail")
        self.holding.pop(claim.worker, None)
        return super().fail(conn, claim, error)


def _explore(queue: OneAtATime, pool: actors.Pool) -> OneAtATime:
    # The recorder knows workers by name; a process restarted under its old name asks
    # again holding nothing (what mutant recover-by-name is caught on), so no restarts.
    harness = Harness(queue=queue, pool=pool, restarts=False)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    return queue


def test_declared_limits_are_honoured_and_still_explored(reference_pool: actors.Pool) -> None:
    queue = _explore(OneAtATime(), reference_pool)
    assert queue.broken == []
    harness = Harness(queue=queue, pool=reference_pool, restarts=False)
    harness.reset()
    done = replay.replay(harness, HELD_COMPLETION)
    assert done.skipped == [], done.skipped
    assert queue.completed_in_transaction > 0, "completions never ran in a held transaction"


class Undeclared(OneAtATime):
    """The same recorder on a queue that declares neither limit."""

    one_claim_per_worker = False
    held_calls = frozenset(contract.CALLS)


def test_without_the_declarations_the_recorder_sees_both(reference_pool: actors.Pool) -> None:
    """The recorder can fail: undeclared, the machine does both things it watches for."""
    broken = set(_explore(Undeclared(), reference_pool).broken)
    assert any("second job" in b for b in broken), broken
    assert any("in a held transaction" in b for b in broken), broken


def test_held_calls_that_are_not_calls_are_refused() -> None:
    queue = ReferenceQueue()
    # The reference declares no held_calls: the test gives it one, wrong, to be refused.
    queue.held_calls = frozenset({"complete", "finish"})  # type: ignore[attr-defined]
    with pytest.raises(contract.ContractError, match="held_calls names finish"):
        contract.capabilities(queue)


class Silent(ReferenceQueue):
    """The reference's heartbeat, fire and forget: it keeps the lease and answers None."""

    name = "silent-heartbeat"
    heartbeat_answers = False

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        super().heartbeat(conn, claim, lease)
        # contract.Queue annotates heartbeat as answering bool, yet a fire-and-forget one
        # (heartbeat_answers = False) answers None, as the contract's docs allow.
        return None  # type: ignore[return-value]


def test_a_heartbeat_that_answers_nothing_is_not_judged(reference_pool: actors.Pool) -> None:
    harness = Harness(queue=Silent(), pool=reference_pool)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    assert any(g.startswith("heartbeat-answers:") for g in contract.not_checked(Silent()))


class Misread(Silent):
    """The same heartbeat, not declared: its None is not an answer the contract allows."""

    heartbeat_answers = True


def test_undeclared_a_silent_heartbeat_is_a_contract_error(reference_pool: actors.Pool) -> None:
    """The declaration is what makes None an answer: without it, the run stops on a contract
    error that names the method and what it returned, never a verdict."""
    harness = Harness(queue=Misread(), pool=reference_pool)
    harness.reset()
    with pytest.raises(contract.ContractError) as caught:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=BUDGET)
    assert str(caught.value).startswith("silent-heartbeat: heartbeat() returned None;")
    assert "heartbeat_answers = False" in str(caught.value)


class WithoutHeartbeat:
    """The reference's calls but `heartbeat`, which a queue that declares it has no
    heartbeats need not define."""

    name = "without-heartbeat"
    max_attempts = 3
    heartbeats = False

    def __init__(self) -> None:
        self.queue = ReferenceQueue()
        q = self.queue
        self.install, self.reset, self.enqueue, self.claim = q.install, q.reset, q.enqueue, q.claim
        self.complete, self.fail, self.effect_key, self.state = (
            q.complete, q.fail, q.effect_key, q.state,
        )  # fmt: skip


class UndeclaredWithoutHeartbeat(WithoutHeartbeat):
    heartbeats = True


def test_a_queue_without_heartbeats_need_not_define_one(reference_pool: actors.Pool) -> None:
    """Declared, the member may be left out: the machine never asks for it (a call of a
    missing method would be an answer, and the run would judge it)."""
    queue = contract.load("tests.test_capabilities:WithoutHeartbeat")
    assert not hasattr(queue, "heartbeat")
    harness = Harness(queue=queue, pool=reference_pool)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=derandomized(40))
    assert harness.moves["heartbeat"] == 0 and harness.moves["claim"] > 0


def test_undeclared_a_missing_heartbeat_is_named() -> None:
    with pytest.raises(contract.ContractError, match="without the contract's members: heartbeat"):
        contract.load("tests.test_capabilities:UndeclaredWithoutHeartbeat")
