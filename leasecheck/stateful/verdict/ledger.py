"""What the oracle has said so far: its verdicts, and what it could not judge.

The families return findings (`stateful.verdict.findings`) and the ledger takes
them, here and only here: the story, the coverage lines and the failure files read
it. A verdict on one job waits behind a stale completion's deferred one on the same
job, so the first cause leads the story.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from leasecheck.stateful import properties as P
from leasecheck.stateful.properties import Violation
from leasecheck.stateful.units import stamp
from leasecheck.stateful.verdict.findings import Declared, Deferred, Finding, Saw, Unjudged


@dataclass
class Ledger:
    """The verdicts given, and the answers said but not judged."""

    violations: list[Violation] = field(default_factory=list)
    deferred: list[Violation] = field(default_factory=list)
    """Accepted stale completions: reported at the end unless a double completion or a
    wronged next owner tells the fuller story first."""
    declared: list[str] = field(default_factory=list)
    """Refusals the queue declares as its design (`revokes_expired`): said, not judged."""
    unjudged: list[str] = field(default_factory=list)
    """Answers that could not be judged, each with why."""
    raised: list[str] = field(default_factory=list)
    """What the queue raised where no grant was at stake (a claim), for the story."""
    situations: Counter[str] = field(default_factory=Counter)
    """The dangerous situations judged so far (`stateful.verdict.coverage`): what was exercised."""
    heard: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    """Told each situation as it is counted: every count, the oracle's and the driver's,
    passes through `saw`, so this is the one place a listener hears them all (a property
    run's machine makes each a Hypothesis event). None when a history is judged again."""

    def take(self, findings: Iterable[Finding]) -> None:
        """Record what a family found, in the order it found it."""
        for found in findings:
            match found:
                case Violation():
                    self.flag_violation(found)
                case Unjudged(said):
                    self.unjudged.append(said)
                case Declared(said):
                    self.declared.append(said)
                case Saw(situation):
                    self.saw(situation)
                case Deferred(violation):
                    self.deferred.append(violation)

    def saw(self, situation: str) -> None:
        """Count a situation (`stateful.verdict.coverage.SITUATIONS`) the example produced."""
        self.situations[situation] += 1
        if self.heard is not None:
            self.heard(situation)

    def flag(
        self,
        prop: str,
        message: str,
        *evidence: str,
        jobs: tuple[str, ...] = (),
        grants: tuple[str, ...] = (),
    ) -> None:
        """Record a violation; a deferred culprit on one of its jobs is reported first.

        A stale completion that was accepted is deferred (it may yet show as a double
        completion, the fuller story). If instead its job's next owner is then judged
        wrongly treated, the stale writer broke the property first: its violation
        leads, and the victim's follows as evidence of what it caused.
        """
        if prop != P.SINGLE_COMPLETION:
            for culprit in [d for d in self.deferred if set(d.jobs) & set(jobs)]:
                self.deferred.remove(culprit)
                self.violations.append(culprit)
        self.violations.append(Violation(prop, message, tuple(evidence), jobs, grants))

    def flag_violation(self, violation: Violation) -> None:
        """Record a violation built whole."""
        self.flag(
            violation.prop,
            violation.message,
            *violation.evidence,
            jobs=violation.jobs,
            grants=violation.grants,
        )

    def answer_raised(self, call: str, at: int, quote: str) -> None:
        """Note an exception the queue raised where no grant was at stake (a claim)."""
        line = f"{call}() raised at t={stamp(at)}: {quote}"
        if line not in self.raised:
            self.raised.append(line)
