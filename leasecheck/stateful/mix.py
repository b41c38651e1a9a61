"""How the machine chooses its next move: a tier, then a family in it, then a move.

Hypothesis draws a step's rule uniformly among the rules whose preconditions hold.
Moves that may almost always be made then crowd out the ones that need a held job:
measured over two `ci` shards, `pause` took 12.5% of the steps and `claim` 12.1%, but
an explicit heartbeat 0.7%, a completion 1.2% and a failure report 1.6%, and the
owner's calls are where the fencing, late-owner and retry-cap races are. So a tiered
step draws, each with the same chance among those with a move that may be made now:
first a tier (the calls a worker or the sweep makes, or the events around them),
then a family in it (the owner's three calls are a family each; the five faults
share one), then a move.

Neither mix is best for every race (measured on the mutants: the tiered one kills
unfenced heartbeats and give-ups sooner, a sweep that undoes a completion later), so,
as in swarm testing, each example draws which one it makes its moves by, and
Hypothesis's swarm of feature flags still disables some moves for a whole example.

A program stays the rules and arguments it was; only the chance of each move
changed, and shrinking still pulls each draw toward the first tier, family and move.
"""

from __future__ import annotations

from typing import Any

from hypothesis.errors import InvalidDefinition
from hypothesis.stateful import RuleBasedStateMachine, RuleStrategy

TIERS: dict[str, dict[str, tuple[str, ...]]] = {
    "calls": {  # what a worker (or the queue's sweep) asks of the queue
        "claim": ("claim", "claim_batch"),
        "complete": ("complete", "complete_batch", "send_effect"),
        "heartbeat": ("heartbeat",),
        "fail": ("fail",),
        "sweep": ("sweep",),
    },
    "events": {  # what happens to the workers and the queue around those calls
        "time": ("time_passes",),
        "fault": ("pause", "resume", "asleep", "crash", "cut"),
        "enqueue": ("enqueue",),
        "transaction": ("open_transaction", "close_transaction"),
        "preemption": ("preempt", "resume_call"),
    },
}
"""Tiers, their families and the families' moves, in the order shrinking prefers.
Every rule of the machine is in one family."""

FAMILY = {
    move: (tier, family) for tier, fs in TIERS.items() for family, ms in fs.items() for move in ms
}


class MoveMix(RuleStrategy):
    """Hypothesis's strategy for a machine's steps (its rules, precondition checks and
    feature flags), changed only in which rule it draws: tier, family, then move."""

    def __init__(self, machine: RuleBasedStateMachine) -> None:
        super().__init__(machine)
        names = {r.function.__name__ for r in self.rules}
        unknown = sorted(names - set(FAMILY))
        if unknown:
            raise TypeError(f"moves with no family in stateful.mix.TIERS: {unknown}")
        self.tiered: bool | None = None  # drawn at the example's first step

    def do_draw(self, data: Any) -> tuple[Any, dict[str, Any]]:
        valid = [r for r in self.rules if self.is_valid(r)]
        if not valid:
            raise InvalidDefinition("no move of the machine may be made: no precondition holds")
        if self.tiered is None:
            self.tiered = bool(data.draw_boolean())
        flags = data.draw(self.enabled_rules_strategy)
        enabled = [r for r in valid if flags.is_enabled(r.function.__name__)] or valid
        rule = self._tiered(data, enabled) if self.tiered else enabled[_index(data, len(enabled))]
        arguments = {k: data.draw(s) for k, s in rule.arguments_strategies.items()}
        return rule, arguments

    @staticmethod
    def _tiered(data: Any, enabled: list[Any]) -> Any:
        by_name = {r.function.__name__: r for r in enabled}
        offered = {FAMILY[name] for name in by_name}
        tiers = [t for t in TIERS if any(tier == t for tier, _ in offered)]
        tier = tiers[_index(data, len(tiers))]
        families = [f for f in TIERS[tier] if (tier, f) in offered]
        family = families[_index(data, len(families))]
        moves = [by_name[m] for m in TIERS[tier][family] if m in by_name]
        return moves[_index(data, len(moves))]


def install(machine: RuleBasedStateMachine) -> None:
    """Give `machine` the mix, when this Hypothesis draws its steps as the mix expects
    (6.100 to 6.170 do: a `RuleStrategy` with its rules, checks and flags); else it
    keeps Hypothesis's own."""
    current = getattr(machine, "_rules_strategy", None)
    needs = ("rules", "is_valid", "enabled_rules_strategy")
    if isinstance(current, RuleStrategy) and all(hasattr(current, a) for a in needs):
        machine._rules_strategy = MoveMix(machine)


def _index(data: Any, n: int) -> int:
    """Draw an index below `n` (no choice when there is one), shrinking toward 0."""
    return 0 if n == 1 else int(data.draw_integer(0, n - 1))
