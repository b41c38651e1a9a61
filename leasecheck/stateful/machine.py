"""The Hypothesis state machine: a thin shell of rules over the driver.

Each rule offers one move of `stateful.engine.driver.Driver` when its precondition (the
driver's `can_*`, read from the model alone, never the database) holds, and picks
its worker or claim with a small integer `pick` into the list of eligible ones, so
a failing program prints as plain arguments and replays exactly. The invariant
judges every property after every step; teardown heals every worker, lets each
finish what it holds, drains the queue and checks that no job was lost. This is
the one module that drives Hypothesis's stateful engine.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from hypothesis import event as _hypothesis_event
from hypothesis import note as _hypothesis_note
from hypothesis import strategies as st
from hypothesis import target as _hypothesis_target
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from leasecheck.stateful.contract import Capabilities
from leasecheck.stateful.engine import isolation
from leasecheck.stateful.engine.core import MAX_JOBS, Harness
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.moves import (
    AFTER,
    BATCH,
    CHANGES,
    HOLD,
    ORDERS,
    PICK,
    STALL,
    TAKE,
    TIMES,
    Stall,
    Take,
)
from leasecheck.stateful.program import recorded
from leasecheck.stateful.properties import violation_error
from leasecheck.stateful.verdict import coverage

__all__ = [
    "Harness",
    "LeaseMachine",
    "PriorityMachine",
    "aim",
    "at_isolation",
    "machine_for",
    "note",
    "situation",
    "violation_error",
]


def note(message: str) -> None:
    """Tell the story of the example (printed with a failing one); silent outside a test."""
    if currently_in_test_context():
        _hypothesis_note(message)


def situation(name: str) -> None:
    """Record a dangerous situation as it is counted as a Hypothesis event, so
    `--hypothesis-show-statistics` shows in what share of examples each came up; silent
    outside a test (a replay, the opening's stories)."""
    if currently_in_test_context():
        _hypothesis_event(name)


def aim(counts: Mapping[str, int]) -> None:
    """Tell Hypothesis how often the example met each situation it aims at
    (`coverage.AIMED`), one label each, so its target phase favours examples that meet
    them more. Call once per example (Hypothesis refuses a label twice): at teardown."""
    if currently_in_test_context():
        for name in coverage.AIMED:
            _hypothesis_target(counts.get(name, 0), label=name)


class LeaseMachine(RuleBasedStateMachine):
    """Workers claim, heartbeat, pause, crash and complete; the oracle judges every answer."""

    def __init__(self, harness: Harness) -> None:
        super().__init__()
        stories = harness.recorder.stories

        def tell(message: str) -> None:
            stories.told(message)
            note(message)

        self.d = Driver(harness, say=tell, seen=situation)
        self.program = self.d.core.program
        stories.begin(self.program)

    @property
    def caps(self) -> Capabilities:
        """What the queue under test declares."""
        return self.d.core.caps

    @initialize(workers=st.integers(min_value=2, max_value=5))
    @recorded
    def start(
        self, workers: int, order: Sequence[int] | None = None, changes: Sequence[int] = ()
    ) -> None:
        """Start the workers and enqueue the first job (an example without one is wasted).
        A program saved by the priority machine says `order` and `changes` too."""
        self.d.start(workers, order, changes)

    @precondition(lambda self: self.d.can_enqueue())
    @rule(jobs=st.integers(min_value=1, max_value=MAX_JOBS - 1))
    @recorded
    def enqueue(self, jobs: int) -> None:
        """The producer adds jobs. It takes an argument only so that it sorts after `asleep`
        and `claim`: see `stateful.engine.moves`."""
        self.d.enqueue(jobs)

    @precondition(lambda self: self.d.can_replan())
    @rule(grow=st.integers(min_value=1, max_value=MAX_JOBS - 1))
    @recorded
    def replan(self, grow: int) -> None:
        """The queue's tables are analyzed while tiny, then grow (`stateful.engine.replan`)."""
        self.d.replan(grow)

    @precondition(lambda self: self.d.can_claim())
    @rule(how=TAKE)
    @recorded
    def claim(self, how: Take, level: str | None = None) -> None:
        """A worker claims the next job; with `held`, inside a transaction it keeps open
        (at `level`, in a program of a machine that draws levels: `stateful.engine.isolation`)."""
        self.d.claim(how, level)

    @precondition(lambda self: self.d.can_claim_batch())
    @rule(pick=PICK, size=BATCH)
    @recorded
    def claim_batch(self, pick: int, size: int) -> None:
        """A worker claims up to `size` jobs in one call (`claim_many`)."""
        self.d.claim_batch(pick, size)

    @precondition(lambda self: self.d.can_complete_batch())
    @rule(pick=PICK, size=BATCH)
    @recorded
    def complete_batch(self, pick: int, size: int) -> None:
        """A worker completes up to `size` of its jobs, newest first, in one call."""
        self.d.complete_batch(pick, size)

    @precondition(lambda self: self.d.can_heartbeat())
    @rule(pick=PICK)
    @recorded
    def heartbeat(self, pick: int) -> None:
        """An explicit heartbeat on the main connection (inside the held transaction, if any)."""
        self.d.heartbeat(pick)

    @precondition(lambda self: self.d.can_call("complete"))
    @rule(pick=PICK)
    @recorded
    def complete(self, pick: int) -> None:
        """A worker finishes a job it holds, whether or not its lease is still good."""
        self.d.complete(pick)

    @precondition(lambda self: self.d.can_call("send"))
    @rule(pick=PICK)
    @recorded
    def send_effect(self, pick: int) -> None:
        """A worker sends the job's external effect (a receipt) keyed by effect_key."""
        self.d.send_effect(pick)

    @precondition(lambda self: self.d.can_call("fail"))
    @rule(pick=PICK)
    @recorded
    def fail(self, pick: int) -> None:
        """A worker reports that a job it holds failed (retry, or give up at the cap)."""
        self.d.fail(pick)

    @precondition(lambda self: self.d.can_pause())
    @rule(pick=PICK)
    @recorded
    def pause(self, pick: int) -> None:
        """SIGSTOP: the worker takes no steps and sends no heartbeats until resumed."""
        self.d.pause(pick)

    @precondition(lambda self: self.d.can_resume())
    @rule(pick=PICK)
    @recorded
    def resume(self, pick: int) -> None:
        """SIGCONT: the worker acts again."""
        self.d.resume(pick)

    @precondition(lambda self: self.d.can_stall())
    @rule(how=STALL)
    @recorded
    def asleep(self, how: Stall) -> None:
        """The story's pause in one step (named to sort first: see `stateful.engine.moves`)."""
        self.d.asleep(how)

    @precondition(lambda self: self.d.can_crash())
    @rule(pick=PICK)
    @recorded
    def crash(self, pick: int) -> None:
        """The worker's process dies: its connections close, mid-transaction or not."""
        self.d.crash(pick)

    @precondition(lambda self: self.d.can_restart())
    @rule(pick=PICK)
    @recorded
    def restart(self, pick: int) -> None:
        """The worker's process dies and comes back under the same worker name."""
        self.d.restart(pick)

    @precondition(lambda self: self.d.can_cut())
    @rule(pick=PICK)
    @recorded
    def cut(self, pick: int) -> None:
        """The server ends the worker's backend; the worker reconnects and keeps its claims."""
        self.d.cut(pick)

    @precondition(lambda self: self.d.can_sweep())
    @rule(after=st.sampled_from(["now", "past-lease-end"]))
    @recorded
    def sweep(self, after: str) -> None:
        """The queue's own recovery (`maintain`) runs, now or just after the next lease ends."""
        self.d.sweep(after)

    @rule(to=st.sampled_from(TIMES))
    @recorded
    def time_passes(self, to: str) -> None:
        """Let time pass; running workers' heartbeats fire on schedule meanwhile."""
        self.d.time_passes(to)

    @precondition(lambda self: self.d.can_open_transaction())
    @rule(pick=PICK)
    @recorded
    def open_transaction(self, pick: int, level: str | None = None) -> None:
        """Open a transaction the worker's next calls run inside, held across steps (at
        `level`, in a program of a machine that draws levels)."""
        self.d.open_transaction(pick, level)

    @precondition(lambda self: self.d.can_preempt())
    @rule(pick=PICK, after=AFTER, hold=HOLD)
    @recorded
    def preempt(self, pick: int, after: int, hold: int | None = None) -> None:
        """An actor's next call is paused after `after` round trips, between two statements,
        for `hold` further steps (a program saved without `hold`: until `resume_call`)."""
        self.d.preempt(pick, after, hold)

    @precondition(lambda self: self.d.can_time_out())
    @rule(pick=PICK)
    @recorded
    def time_out(self, pick: int) -> None:
        """A worker's next call that waits on a lock fails as its lock_timeout would."""
        self.d.time_out(pick)

    @precondition(lambda self: self.d.can_resume_call())
    @rule(pick=PICK)
    @recorded
    def resume_call(self, pick: int) -> None:
        """A call paused between its statements goes on."""
        self.d.resume_call(pick)

    @precondition(lambda self: self.d.can_close_transaction())
    @rule(pick=PICK, commit=st.booleans())
    @recorded
    def close_transaction(self, pick: int, commit: bool) -> None:
        """Commit or roll back a held transaction; calls blocked behind it go on."""
        self.d.close_transaction(pick, commit)

    @invariant()
    def every_property_holds(self) -> None:
        """single-completion, unique-effects, atomic-rejection, exclusive-lease, fencing,
        retry-cap, owner-progress and no-lost-jobs, from the database and the history."""
        self.d.check()

    def teardown(self) -> None:
        """End the example and aim Hypothesis at its rare situations (`aim`, once per
        example, with the drain's counted); past the shrink budget, stop Hypothesis
        (`ShrinkSpent`)."""
        budget = self.d.core.h.shrink
        # Hypothesis tears down in a `finally`: what a step or a check raised is in flight.
        step_error = sys.exc_info()[1]
        try:
            self.d.teardown()
        except Exception as error:
            budget.end(error)
            raise
        aim(self.d.core.oracle.ledger.situations)
        budget.end(step_error)


class PriorityMachine(LeaseMachine):
    """The same rules, with the workers' own moves on a priority schedule (PCT).

    Each example draws the workers' priorities and up to two change points; see
    `stateful.engine.priorities` for why that reaches interleavings uniform picks rarely do.
    """

    @initialize(workers=st.integers(min_value=2, max_value=5), order=ORDERS, changes=CHANGES)
    @recorded
    def start(
        self, workers: int, order: Sequence[int] | None = None, changes: Sequence[int] = ()
    ) -> None:
        """Start the workers, their priorities and where they change; enqueue the first job."""
        self.d.start(workers, order, changes)


SCHEDULES = {"random": LeaseMachine, "pct": PriorityMachine}
"""The machines a run may use, by the name `--leasecheck-schedule` takes (and `mixed`)."""


def machine_for(
    schedule: str, shard: int = 0, level: str = isolation.DEFAULT
) -> type[LeaseMachine]:
    """Return the machine class of `schedule`; `mixed` runs the random machine on even
    shards and the priority machine on odd ones, so a run has both. With an isolation
    `level` other than the default, its held transactions draw theirs (`at_isolation`)."""
    if schedule == "mixed":
        schedule = "pct" if shard % 2 else "random"
    machine = SCHEDULES[schedule]
    return machine if level == isolation.DEFAULT else at_isolation(machine, level)


def at_isolation(machine: type[LeaseMachine], mode: str) -> type[LeaseMachine]:
    """Return `machine` with each held transaction's level an argument of its step, drawn
    under `mode` (`stateful.engine.isolation`): the program says it, so it replays and shrinks.
    The default machine draws none, so its runs are the ones they always were."""
    levels = isolation.strategy(mode)

    class Isolated(machine):  # type: ignore[valid-type,misc]
        @precondition(lambda self: self.d.can_claim())
        @rule(how=TAKE, level=levels)
        @recorded
        def claim(self, how: Take, level: str | None = None) -> None:
            """A worker claims; with `held`, in a transaction at `level`."""
            self.d.claim(how, level if how.held else None)

        @precondition(lambda self: self.d.can_open_transaction())
        @rule(pick=PICK, level=levels)
        @recorded
        def open_transaction(self, pick: int, level: str | None = None) -> None:
            """Open a transaction held across steps, at `level`."""
            self.d.open_transaction(pick, level)

        @precondition(lambda self: self.d.can_work_in_transaction())
        @rule(pick=PICK, level=levels)
        @recorded
        def work_in_transaction(self, pick: int, level: str | None = None) -> None:
            """A worker's job body and completion run in a transaction at `level`, while
            its heartbeats renew the lease (`Driver.work_in_transaction`)."""
            self.d.work_in_transaction(pick, level)

    Isolated.__name__ = Isolated.__qualname__ = f"{machine.__name__}[{mode}]"
    return Isolated


REPLAYER = at_isolation(LeaseMachine, "drawn")
"""The machine a saved program replays on: every rule any machine has, so a program
saved under any isolation mode replays (the levels are its arguments)."""
