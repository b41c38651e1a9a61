"""The machine's shape without its body: what Hypothesis alone costs a step.

`Hollow` has the rules of `stateful.machine.LeaseMachine`, read from the same table of
moves with the same names and argument strategies, and bodies that do nothing: no
SQL, no threads, no model. Run with the same settings, its steps per second are the
ceiling the harness cannot pass, so `bench.step_cost` reports it beside the real
machine. Its preconditions always hold, so Hypothesis never has to skip a rule: a
slightly low floor, not a high one.
"""

from __future__ import annotations

from typing import Any

from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from leasecheck.stateful.rules import RULES, Variant


class Hollow(RuleBasedStateMachine):
    """Every rule of the lease machine, doing nothing."""

    steps = 0
    examples = 0

    def __init__(self) -> None:
        super().__init__()
        Hollow.examples += 1

    @invariant()
    def counted(self) -> None:
        Hollow.steps += 1


def _nothing(name: str) -> Any:
    def move(self: Hollow, **args: Any) -> None:
        pass

    move.__name__ = move.__qualname__ = name
    return move


for _move in (m for m in RULES if m.present(Variant())):
    _drawn = _move.arguments(Variant())
    _decorate: Any = initialize if _move.initial else rule  # draws: no Bundle targets
    setattr(Hollow, _move.name, _decorate(**_drawn)(_nothing(_move.name)))
