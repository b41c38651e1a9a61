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

OWNERSHIP = "ownership"
FINALITY = "finality"
HIDDEN = "hidden claims"
DELIVERY = "delivery"
FAMILIES = (OWNERSHIP, FINALITY, HIDDEN, DELIVERY)
"""The analyzers that judge the properties: who owns a job when (its grants, leases and
answers), how each job ends, what the queue shows running, and what its effects and keys
do at a receiver."""


@dataclass(frozen=True)
class Property:
    """One property, in the one place each thing said of it is written: the reference,
    README's table, docs/properties.md and the picture's legend all read it from here (a
    test holds README and properties.md to it)."""

    id: str
    family: str
    holds: str
    """What holds, in a line: the reference, the legend of a failure's picture."""
    brief: str
    """README's line."""
    detail: str
    """docs/properties.md's line: what holds, with the cases it does not judge."""
    checked_from: str
    """What the judge reads to tell it."""


REGISTRY: tuple[Property, ...] = (
    Property(
        SINGLE_COMPLETION,
        OWNERSHIP,
        holds="at most one completion commits per job",
        brief="at most one completion commits per job",
        detail="at most one completion commits per job",
        checked_from=(
            "rows the harness's effect wrote inside completion transactions (accepted completions, "
            "for `transactional_effects = False`)"
        ),
    ),
    Property(
        UNIQUE_EFFECTS,
        DELIVERY,
        holds="a receiver deduplicating on effect_key accepts one effect per job",
        brief="a receiver deduplicating on `effect_key` accepts at most one effect per job",
        detail=(
            "a receiver deduplicating on `effect_key` accepts at most one effect per job; "
            "keys of a job never change"
        ),
        checked_from="the harness's receiver",
    ),
    Property(
        ATOMIC_REJECTION,
        DELIVERY,
        holds="a rejected completion leaves no trace",
        brief="a rejected completion leaves no effect",
        detail="a rejected (or rolled back) completion leaves no effect row",
        checked_from="effect rows by call id",
    ),
    Property(
        EXCLUSIVE_LEASE,
        OWNERSHIP,
        holds="no two claims of one job hold unexpired leases at the same moment",
        brief="no two claims of one job hold unexpired leases at once",
        detail="no two claims of one job hold unexpired leases at once",
        checked_from="model of grants and heartbeats",
    ),
    Property(
        FENCING,
        OWNERSHIP,
        holds="every claim gets a fresh token; a stale claim's calls are rejected",
        brief="a stale claim's heartbeat, completion and failure report are refused",
        detail=(
            "every claim carries a fresh token (greater, if declared ordered); a stale claim's "
            "heartbeat, completion and failure are rejected"
        ),
        checked_from="model",
    ),
    Property(
        RETRY_CAP,
        OWNERSHIP,
        holds=(
            "no job is claimed more than max_attempts times, nor again after max_failures accepted "
            "failure reports"
        ),
        brief=(
            "no job is claimed more than `max_attempts` times (or again after `max_failures` "
            "failure reports)"
        ),
        detail=(
            "no job is claimed more than `max_attempts` times, nor again after `max_failures` "
            "accepted failure reports (skipped when both are None)"
        ),
        checked_from="model",
    ),
    Property(
        OWNER_PROGRESS,
        OWNERSHIP,
        holds="the current owner (lease unexpired, nobody else granted) is never refused",
        brief="the current owner is never refused",
        detail="the current owner (its lease unexpired, nobody else granted) is never refused",
        checked_from="model",
    ),
    Property(
        LATE_OWNER,
        OWNERSHIP,
        holds=(
            "a late owner whose expired lease nobody took over is not refused, unless the queue "
            "gave the job up at its cap or declares revokes_expired"
        ),
        brief="a late owner nobody took over from is not refused",
        detail=(
            "a late owner whose expired lease nobody took over is not refused, unless the queue "
            "shows the job given up at its cap (`state`) or declares `revokes_expired`"
        ),
        checked_from="model and `state`",
    ),
    Property(
        NO_LOST_JOBS,
        FINALITY,
        holds=(
            "after healing and a full drain, the queue shows every job done once or failed for good"
        ),
        brief="after healing and a drain, every job is done once or failed for good",
        detail=(
            "after healing, finishing held work and a drain that follows scheduled retries, the "
            "queue shows every job done once or failed for good"
        ),
        checked_from="`state`",
    ),
    Property(
        DONE_EFFECT,
        FINALITY,
        holds="every job the queue shows done had its effect exactly once",
        brief="every job shown done had its effect",
        detail=(
            "every job the queue shows done had its effect: a queue that commits `done` and then "
            "runs the effect in another transaction loses it when its worker dies between the two"
        ),
        checked_from=(
            "`state` after the drain, against the effect rows (the receiver's accepted "
            "effects, for `transactional_effects = False`; an effect the machine held back "
            "for an uncommitted claim is said, not judged)"
        ),
    ),
    Property(
        DISTINCT_KEYS,
        DELIVERY,
        holds="distinct jobs never share an effect_key a receiver deduplicates on",
        brief="distinct jobs never share an `effect_key`",
        detail=(
            "distinct jobs never share an `effect_key` (a receiver deduplicating on it would drop "
            "one job's effect as the other's duplicate)"
        ),
        checked_from="the keys of the claims the queue handed out",
    ),
    Property(
        NO_HIDDEN_CLAIMS,
        HIDDEN,
        holds=(
            "every job the queue shows running was handed out by a claim (a claim takes only what "
            "it hands out)"
        ),
        brief="a claim takes only what it hands out",
        detail=(
            "a claim takes only what it hands out: after a step in which a claim answered, every "
            "job the queue shows `running` is held by a grant not released (claims in flight, "
            "claims that lost their answer and finished jobs are not judged)"
        ),
        checked_from="`state`, against the model of grants",
    ),
)

DESCRIPTIONS = {p.id: p.holds for p in REGISTRY}
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
