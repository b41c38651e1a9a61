"""How small a world is searched whole, and what a search of it found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from leasecheck.stateful.moves import TIMES
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated

EVERY_RULE: frozenset[str] = frozenset()
"""A scope's `rules` when every move the machine has is offered."""


@dataclass(frozen=True)
class Scope:
    """Workers, jobs, moves per program and preemptions per program; and the rules a
    move may be (all of them unless `rules` names some), so a scope says exactly which
    programs "searched whole" covers."""

    workers: int = 2
    jobs: int = 1
    moves: int = 3
    preemptions: int = 1
    rules: frozenset[str] = EVERY_RULE
    times: tuple[str, ...] = TIMES
    """Where `time_passes` may move the clock, when the scope offers it."""
    held_claims: bool = True
    """Whether a claim may also run inside a transaction held open (when the queue allows
    it): False where what a scope is for needs only claims that commit at once."""

    def start(self) -> list[Step]:
        steps = [Step("start", {"workers": self.workers})]
        if self.jobs > 1:
            steps.append(Step("enqueue", {"jobs": self.jobs - 1}))
        return steps

    def offers(self, rule: str) -> bool:
        return not self.rules or rule in self.rules

    def where(self, moves: int | None = None) -> str:
        """Return the scope in words: `2 workers, 1 job, 5 moves, 1 preemption`."""
        n = self.moves if moves is None else moves
        said = (
            f"{self.workers} worker{'s' * (self.workers != 1)}, {self.jobs} "
            f"job{'s' * (self.jobs != 1)}, {n} move{'s' * (n != 1)}, {self.preemptions} "
            f"preemption{'s' * (self.preemptions != 1)}"
        )
        if self.rules:
            rules = sorted(self.rules)
            if "time_passes" in self.rules and self.times != TIMES:
                rules[rules.index("time_passes")] = f"time_passes to {'/'.join(self.times)}"
            held = "" if self.held_claims else "; claims commit at once"
            said += f" (moves: {', '.join(rules)}{held})"
        elif not self.held_claims:
            said += " (claims commit at once)"
        return said


@dataclass
class Outcome:
    """What a search found, and how much of the scope it covered."""

    schedules: int = 0
    states: int = 0
    seconds: float = 0.0
    complete: bool = True
    """False when the budget ran out before the scope was searched whole."""
    depth: int = 0
    """The program length searched whole."""
    violation: PropertyViolated | None = None
    counterexample: list[Step] = field(default_factory=list)
    running_on: tuple[str, ...] = ()
    """The sequences the queue's reset left running on (see `hint`)."""

    def hint(self) -> str:
        """Return why a search was cut short early, when the queue's reset is the cause:
        it leaves a sequence running on, so every program's ids differ from the last
        run's and no two states merge."""
        if self.complete or not self.running_on:
            return ""
        return (
            f"; its reset leaves {', '.join(self.running_on)} running on, so ids differ on "
            "every run and no two states merge: reset with TRUNCATE ... RESTART IDENTITY "
            "(or leasecheck.tables.empty)"
        )

    def said(self, scope: Scope) -> str:
        """Return the closing line."""
        counts = f"{self.schedules} schedules, {self.states} distinct states, {self.seconds:.0f} s"
        if self.violation is not None:
            return f"violation in scope ({scope.where()}) after {counts}"
        if not self.complete:
            return (
                f"budget ran out: programs of up to {self.depth} moves searched whole, not "
                f"{scope.moves} ({scope.where()}; {counts}); no violation found so far, which "
                f"proves nothing about the rest{self.hint()}"
            )
        return f"no violation in scope ({scope.where()}): {counts}"


Progress = Callable[[Outcome, int, int, int], None]
"""Told, as a search goes, what it has done: the outcome so far, the program length it
is searching, how many programs of that length it has run and how many there are."""


def silent(done: Outcome, depth: int, ran: int, total: int) -> None:
    """The `Progress` of a search nobody watches."""
