"""The properties, each under the stable id used in test names, reports and mutants."""

from __future__ import annotations

from dataclasses import dataclass

SINGLE_COMPLETION = "single-completion"
UNIQUE_EFFECTS = "unique-effects"
EXCLUSIVE_LEASE = "exclusive-lease"
FENCING = "fencing"
OWNER_PROGRESS = "owner-progress"
LATE_OWNER = "late-owner"
NO_LOST_JOBS = "no-lost-jobs"
RETRY_CAP = "retry-cap"
ATOMIC_REJECTION = "atomic-rejection"
DONE_EFFECT = "done-effect"
DISTINCT_KEYS = "distinct-keys"
NO_HIDDEN_CLAIMS = "no-hidden-claims"

DESCRIPTIONS = {
    SINGLE_COMPLETION: "at most one completion commits per job",
    UNIQUE_EFFECTS: "a receiver deduplicating on effect_key accepts one effect per job",
    ATOMIC_REJECTION: "a rejected completion leaves no trace",
    EXCLUSIVE_LEASE: "no two claims of one job hold unexpired leases at the same moment",
    FENCING: "every claim gets a fresh token; a stale claim's calls are rejected",
    RETRY_CAP: (
        "no job is claimed more than max_attempts times, nor again after max_failures "
        "accepted failure reports"
    ),
    OWNER_PROGRESS: "the current owner (lease unexpired, nobody else granted) is never refused",
    LATE_OWNER: "a late owner whose expired lease nobody took over is not refused, unless "
    "the queue gave the job up at its cap or declares revokes_expired",
    NO_LOST_JOBS: "after healing and a full drain, the queue shows every job done once or "
    "failed for good",
    DONE_EFFECT: "every job the queue shows done had its effect exactly once",
    DISTINCT_KEYS: "distinct jobs never share an effect_key a receiver deduplicates on",
    NO_HIDDEN_CLAIMS: "every job the queue shows running was handed out by a claim "
    "(a claim takes only what it hands out)",
}
ALL = tuple(DESCRIPTIONS)


@dataclass(frozen=True)
class Violation:
    """One broken property, with the story of how and the evidence.

    `jobs` and `grants` are what it rests on, as data (job labels; grant labels, the
    culprit first), so a picture or a report finds them without reading the words.
    """

    prop: str
    message: str
    evidence: tuple[str, ...] = ()
    jobs: tuple[str, ...] = ()
    grants: tuple[str, ...] = ()

    def refs(self) -> dict[str, list[str]]:
        """Return the references as plain JSON values."""
        return {"jobs": list(self.jobs), "grants": list(self.grants)}

    def __str__(self) -> str:
        lines = [f"[{self.prop}] {self.message}", *(f"    {e}" for e in self.evidence)]
        return "\n".join(lines)


class PropertyViolated(AssertionError):
    """Raised by the machine when a property fails; `violation.prop` names it."""

    def __init__(self, violation: Violation, report: str = "") -> None:
        self.violation = violation
        super().__init__(f"{violation}\n{report}".rstrip())


_ERRORS: dict[str, type[PropertyViolated]] = {}


def violation_error(prop: str) -> type[PropertyViolated]:
    """Return the exception class for one property (distinct classes shrink separately)."""
    if prop not in _ERRORS:
        name = "".join(part.title() for part in prop.split("-")) + "Violated"
        _ERRORS[prop] = type(name, (PropertyViolated,), {"__module__": __name__})
    return _ERRORS[prop]
