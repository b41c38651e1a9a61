"""The tests every adapter passes, to subclass: the contract is usable, one job goes
round once, the search finds only what the library gives up, and what it gives up is
shown by the counterexamples committed for it.

A subclass names its queue and what the library does not promise; its module assigns
the fixtures (`kit.fixtures`). Pytest collects the subclass (`Test...`), never this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from leasecheck.kit.budget import budget
from leasecheck.stateful import clock, contract, properties
from leasecheck.stateful.contract import Queue, as_claim, capabilities
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay

TICK = timedelta(microseconds=1)
"""How far simulated time moves between two steps of the machine."""


@contextmanager
def _workers(
    queue: Queue, conn: psycopg.Connection[Any], dsn: str
) -> Iterator[Callable[[str], Any]]:
    """Yield what a worker's calls get, by worker name: `conn`, or, for a queue that
    opens its own connections, a client of that worker's (on simulated time, as the
    machine's are), each closed after."""
    clients = contract.clients(queue)
    if clients is None:
        yield lambda worker: conn
        return
    opened: dict[str, Any] = {}

    def on(worker: str) -> Any:
        if worker not in opened:
            opened[worker] = clients.connect(worker, make_conninfo(dsn, options=clock.OPTIONS))
        return opened[worker]

    try:
        yield on
    finally:
        for client in opened.values():
            clients.disconnect(client)


class AdapterTests:
    """Subclass as `class TestMyLib(kit.AdapterTests)` and set `queue`, and `given_up`
    when the library does not promise every property."""

    queue: ClassVar[Any]
    """The adapter's class, or any function that builds the queue with no arguments."""
    given_up: ClassVar[frozenset[str]] = frozenset()
    """The properties the library does not promise (its documented behaviour, or the
    findings its counterexamples show): excused in the search for the others."""
    search_finds: ClassVar[bool] = True
    """Whether the budget's search meets one of `given_up`. Some need a longer search
    than a test has; then say False, and commit the counterexamples instead."""
    counterexamples: ClassVar[Path | None] = None
    """A directory of failure files (`leasecheck replay` reads them), one per property
    given up: each must still break its property on the library."""
    examples: ClassVar[int] = 100
    """The search budget, in examples of up to 30 steps, derandomized."""
    lease: ClassVar[timedelta] = timedelta(seconds=30)

    def make(self) -> Queue:
        """Return a fresh queue, as a property run builds it."""
        make = getattr(type(self), "queue", None)
        if make is None:
            raise TypeError(
                f"{type(self).__name__} names no queue: set `queue = MyLibQueue` (the "
                "adapter's class, or a function that builds it) in the class body"
            )
        return make()  # type: ignore[no-any-return]

    def test_the_queue_meets_the_contract(self) -> None:
        """Every required member is there, the declarations are well formed, and what
        it gives up names properties that exist."""
        queue = self.make()
        assert contract.missing_members(queue) == []
        capabilities(queue)  # a malformed declaration raises ContractError
        assert self.given_up <= set(properties.ALL), sorted(self.given_up - set(properties.ALL))

    def test_one_job_goes_round_once(self, conn: psycopg.Connection[Any], adapter_dsn: str) -> None:
        """Enqueued, claimed by one worker and not by another, completed with its effect
        where the library runs it, then claimed by nobody; state() follows each step.
        A queue on its own connections runs each worker's calls on a client of its own."""
        queue = self.make()
        caps = capabilities(queue)
        with _workers(queue, conn, adapter_dsn) as on:
            job = queue.enqueue(conn, {"n": 1})
            self._shows(conn, caps, job, "queued")
            (caps.advance_clock or clock.advance)(conn, TICK)  # as the machine's every step
            raw = queue.claim(on("w0"), "w0", self.lease)
            assert raw is not None, "the only job was not handed out"
            assert as_claim(raw).job_id == job
            self._shows(conn, caps, job, "running")
            assert queue.claim(on("w1"), "w1", self.lease) is None, "one job was handed out twice"
            ran: list[object] = []
            assert queue.complete(on("w0"), raw, ran.append) is True
            assert bool(ran) == caps.transactional_effects, (
                "complete() ran the effect" if ran else "complete() did not run the effect"
            )
            self._shows(conn, caps, job, "done")
            assert queue.claim(on("w1"), "w1", self.lease) is None, "a done job was handed out"

    @staticmethod
    def _shows(
        conn: psycopg.Connection[Any], caps: contract.Capabilities, job: object, status: str
    ) -> None:
        if caps.state is not None:
            assert caps.state(conn, job) == status  # type: ignore[arg-type]

    def test_the_search_finds_what_it_gives_up(self, pool: actors.Pool) -> None:
        """Within the budget, the search stops on one of the properties given up."""
        if not self.given_up:
            pytest.skip("the adapter gives nothing up")
        if not self.search_finds:
            pytest.skip("the budget's search does not reach it; the counterexamples show it")
        with pytest.raises(PropertyViolated) as caught:
            self._search(pool, frozenset())
        assert caught.value.violation.prop in self.given_up, caught.value.violation

    def test_every_other_property_holds(self, pool: actors.Pool) -> None:
        """With what it gives up excused, the same budget finds no violation."""
        self._search(pool, self.given_up)

    def test_the_committed_counterexamples_replay(self, pool: actors.Pool) -> None:
        """Each committed failure file breaks its property again, step by step."""
        if self.counterexamples is None:
            pytest.skip("no counterexamples committed for the adapter")
        files = sorted(self.counterexamples.glob("*.json"))
        assert files, f"no failure files in {self.counterexamples}"
        for path in files:
            saved = replay.load(path)
            assert saved.prop in self.given_up, f"{path.name}: {saved.prop} is not given up"
            harness = Harness(queue=self.make(), pool=pool, excused=self.given_up - {saved.prop})
            harness.reset()
            with pytest.raises(PropertyViolated) as caught:
                replay.replay(harness, saved.steps)
            assert caught.value.violation.prop == saved.prop, (path.name, caught.value.violation)

    def _search(self, pool: actors.Pool, excused: frozenset[str]) -> None:
        harness = Harness(queue=self.make(), pool=pool, excused=excused)
        harness.reset()
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=budget(self.examples))
