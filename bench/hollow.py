"""The machine's shape without its body: what Hypothesis alone costs a step.

`Hollow` has the rules of `stateful.machine.LeaseMachine`, with the same names and
argument strategies, and bodies that do nothing: no SQL, no threads, no model. Run
with the same settings, its steps per second are the ceiling the harness cannot pass,
so `bench.step_cost` reports it beside the real machine. Its preconditions always
hold, so Hypothesis never has to skip a rule: a slightly low floor, not a high one.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from leasecheck.stateful.engine.core import MAX_JOBS
from leasecheck.stateful.engine.moves import (
    AFTER,
    BATCH,
    HOLD,
    PICK,
    STALL,
    TAKE,
    TIMES,
    Stall,
    Take,
)


class Hollow(RuleBasedStateMachine):
    """Every rule of the lease machine, doing nothing."""

    steps = 0
    examples = 0

    def __init__(self) -> None:
        super().__init__()
        Hollow.examples += 1

    @initialize(workers=st.integers(min_value=2, max_value=5))
    def start(self, workers: int) -> None:
        pass

    @rule(jobs=st.integers(min_value=1, max_value=2))
    def enqueue(self, jobs: int) -> None:
        pass

    @rule(grow=st.integers(min_value=1, max_value=MAX_JOBS - 1))
    def replan(self, grow: int) -> None:
        pass

    @rule(how=TAKE)
    def claim(self, how: Take) -> None:
        pass

    @rule(how=STALL)
    def asleep(self, how: Stall) -> None:
        pass

    @rule(pick=PICK)
    def heartbeat(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def complete(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def send_effect(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def fail(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def pause(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def resume(self, pick: int) -> None:
        pass

    @rule(pick=PICK, after=AFTER, hold=HOLD)
    def preempt(self, pick: int, after: int, hold: int) -> None:
        pass

    @rule(pick=PICK)
    def resume_call(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def crash(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def restart(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def cut(self, pick: int) -> None:
        pass

    @rule(pick=PICK)
    def time_out(self, pick: int) -> None:
        pass

    @rule(pick=PICK, size=BATCH)
    def claim_batch(self, pick: int, size: int) -> None:
        pass

    @rule(pick=PICK, size=BATCH)
    def complete_batch(self, pick: int, size: int) -> None:
        pass

    @rule(after=st.sampled_from(["now", "past-lease-end"]))
    def sweep(self, after: str) -> None:
        pass

    @rule(to=st.sampled_from(TIMES))
    def time_passes(self, to: str) -> None:
        pass

    @rule(pick=PICK)
    def open_transaction(self, pick: int) -> None:
        pass

    @rule(pick=PICK, commit=st.booleans())
    def close_transaction(self, pick: int, commit: bool) -> None:
        pass

    @invariant()
    def counted(self) -> None:
        Hollow.steps += 1
