"""The Hypothesis state machine: a thin shell whose rules are the table of moves.

Each rule of `stateful.rules.RULES` becomes a rule of the machine that plays the
driver's move of its name when its precondition (the driver's `can_*`, read from the
model alone, never the database) holds, and picks its worker or claim with a small
integer `pick` into the list of eligible ones, so a failing program prints as plain
arguments and replays exactly. The invariant judges every property after every step;
teardown heals every worker, lets each finish what it holds, drains the queue and
checks that no job was lost. This is the one module that drives Hypothesis's stateful
engine.

A variant (a priority schedule, drawn isolation levels) is built from the same table
(`build`), never written as a subclass; a subclass of `Machine` may watch a run (count
its steps, note its failures) and is built into any variant the same way.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from typing import Any

from hypothesis import event as _hypothesis_event
from hypothesis import note as _hypothesis_note
from hypothesis import target as _hypothesis_target
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from leasecheck.stateful.contract import Capabilities
from leasecheck.stateful.engine import isolation
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.program import recorded
from leasecheck.stateful.properties import violation_error
from leasecheck.stateful.rules import RULES, SCHEDULES, Rule, Variant
from leasecheck.stateful.verdict import coverage

__all__ = [
    "REPLAYER",
    "SCHEDULES",
    "Harness",
    "LeaseMachine",
    "Machine",
    "PriorityMachine",
    "aim",
    "build",
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


class Machine(RuleBasedStateMachine):
    """Workers claim, heartbeat, pause, crash and complete; the oracle judges every answer.

    The shell every variant shares: its rules are added by `build`."""

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

    def play(self, rule: str, **args: Any) -> None:
        """Play the move `rule` (a name in the table of moves) as a program's step does."""
        getattr(self, rule)(**args)

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


def _rule(move: Rule, variant: Variant) -> Any:
    """Return `move` as a rule of a machine built for `variant`: recorded in the
    program, then played by the driver's method of its name (whose signature and
    documentation it carries, so a hand-written program is checked against them)."""
    play = getattr(Driver, move.name)

    @functools.wraps(play)
    def step(self: Machine, **args: Any) -> None:
        play(self.d, **args)

    decorate: Any = initialize if move.initial else rule  # draws: no Bundle targets
    drawn = decorate(**move.arguments(variant))(recorded(step))
    when = move.when
    return drawn if when is None else precondition(lambda self: when(self.d))(drawn)


NAMES = {"random": "LeaseMachine", "pct": "PriorityMachine"}


def build(
    schedule: str = "random", mode: str = isolation.DEFAULT, shell: type[Machine] = Machine
) -> type[Machine]:
    """Return the machine of `schedule` whose held transactions run under isolation
    `mode`, with every rule of the table its variant has, on `shell` (a subclass that
    watches the run, or the plain one). Built once per arguments."""
    return _build(schedule, mode, shell)


@functools.cache
def _build(schedule: str, mode: str, shell: type[Machine]) -> type[Machine]:
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; one of {', '.join(SCHEDULES)}")
    variant = Variant(schedule, mode)
    rules = {m.name: _rule(m, variant) for m in RULES if m.present(variant)}
    name = NAMES[schedule] + ("" if mode == isolation.DEFAULT else f"[{mode}]")
    made = type(name, (shell,), rules)
    made.__doc__ = shell.__doc__
    return made


LeaseMachine = build()
"""The machine of uniform picks at the default isolation level."""

PriorityMachine = build("pct")
"""The same rules, with the workers' own moves on a priority schedule (PCT): each example
draws the workers' priorities and up to two change points; see
`stateful.engine.priorities` for why that reaches interleavings uniform picks rarely do."""


def machine_for(
    schedule: str,
    shard: int = 0,
    level: str = isolation.DEFAULT,
    shell: type[Machine] = Machine,
) -> type[Machine]:
    """Return the machine of `schedule`; `mixed` runs the random machine on even shards
    and the priority machine on odd ones, so a run has both. With an isolation `level`
    other than the default, each held transaction's level is an argument of its step,
    drawn under `level` (`stateful.engine.isolation`): the program says it, so it replays
    and shrinks. The default machine draws none, so its runs are the ones they always were."""
    if schedule == "mixed":
        schedule = "pct" if shard % 2 else "random"
    if schedule not in SCHEDULES:
        raise KeyError(schedule)
    return build(schedule, level, shell)


REPLAYER = build("random", "drawn")
"""The machine a saved program replays on: every rule any machine has, so a program
saved under any isolation mode replays (the levels are its arguments), and its `start`
takes a priority schedule's arguments too (the driver's `start` does)."""
