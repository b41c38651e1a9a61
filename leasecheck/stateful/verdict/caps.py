"""retry-cap, and what each job was promised: the caps on claims (`max_attempts`) and on
accepted failure reports (`max_failures`) a queue declares.

A grant past either cap breaks retry-cap. A job the queue shows failed for good was given
up rightly once it used a cap (late-owner and no-lost-jobs ask `exhausted`); if calls
that lost their answers may have used its last attempts unseen, that is said, not judged.
A cap on failures counts only the reports told before a claim was sent: one accepted
while the claim was in flight may have come after it took the job.
"""

from __future__ import annotations

from leasecheck.stateful import properties as P
from leasecheck.stateful.verdict.findings import Finding, Saw, Unjudged, Violation
from leasecheck.stateful.verdict.grants import JobModel
from leasecheck.stateful.verdict.view import Promises


def seen(oracle: Promises, job: JobModel) -> list[Finding]:
    """Count a claim of `job` (not yet recorded) at or past its cap on claims."""
    cap, n = oracle.max_attempts, len(job.grants) + 1
    if cap is None or n < cap:
        return []
    return [Saw("claim at the attempt cap" if n == cap else "claim past the attempt cap tried")]


def judge(oracle: Promises, job: JobModel, label: str, sent: int | None) -> list[Finding]:
    """Judge a grant of `job` (not yet recorded; `sent`: its claim call, if it was in
    flight) against both caps."""
    found: list[Finding] = []
    cap, n = oracle.max_attempts, len(job.grants) + 1
    if cap is not None and n > cap:
        found.append(
            Violation(
                P.RETRY_CAP,
                f"{job.label} claimed {n} times; the queue promises at most {cap}",
                jobs=(job.label,),
                grants=(label, *(g.label for g in job.grants)),
            )
        )
    failures = oracle.max_failures
    if failures is None or len(job.failed) < failures:
        return found
    flight = oracle.in_flight
    since = flight.failed_when_sent.get(sent, oracle.failed_told) if sent is not None else None
    before = [f for f in job.failed if since is None or f < since]
    if len(before) < failures:
        found.append(
            Unjudged(
                f"{label} was granted while its claim was in flight, and {job.label}'s "
                f"failure report number {failures} was accepted meanwhile: which came first "
                "cannot be told"
            )
        )
        return found
    found.append(
        Violation(
            P.RETRY_CAP,
            f"{job.label} was claimed again ({label}) after the queue had accepted "
            f"{len(before)} failure reports; the queue promises to give a job up at {failures}",
            jobs=(job.label,),
            grants=(label,),
        )
    )
    return found


def capped(oracle: Promises) -> bool:
    """Return whether the queue promises to give jobs up at a cap (on claims or failures)."""
    return oracle.max_attempts is not None or oracle.max_failures is not None


def exhausted(oracle: Promises, job: JobModel) -> bool:
    """Return whether the job used every claim, or every failure, it was promised."""
    claims, failures = oracle.max_attempts, oracle.max_failures
    return (claims is not None and len(job.grants) >= claims) or (
        failures is not None and len(job.failed) >= failures
    )


def may_be_exhausted(oracle: Promises, job: JobModel) -> bool:
    """Return whether claims, or failure reports, that lost their answers could have used
    the job's last attempts unseen."""
    claims, failures = oracle.max_attempts, oracle.max_failures
    lost = oracle.in_flight.lost
    return (claims is not None and len(job.grants) + lost >= claims) or (
        failures is not None and len(job.failed) + job.failures_unknown >= failures
    )


def promised(oracle: Promises, job: JobModel) -> str:
    """Return what the job had used of what it was promised, in words."""
    used = []
    if oracle.max_attempts is not None:
        used.append(f"{len(job.grants)} claims of the {oracle.max_attempts} it was promised")
    if oracle.max_failures is not None:
        used.append(
            f"{len(job.failed)} accepted failure reports of the {oracle.max_failures} "
            "it was promised"
        )
    return " and ".join(used)


def lost_attempts(oracle: Promises, job: JobModel) -> str:
    """Say why whether the job used up its attempts cannot be told."""
    counted = []
    if oracle.max_attempts is not None and oracle.in_flight.lost:
        counted.append((oracle.in_flight.lost, "claim"))
    if oracle.max_failures is not None and job.failures_unknown:
        counted.append((job.failures_unknown, "failure report"))
    calls = " and ".join(f"{n} {what}{'s' if n != 1 else ''}" for n, what in counted)
    one = sum(n for n, _ in counted) == 1
    return (
        f"the queue shows it failed for good after {promised(oracle, job)}, and {calls} "
        f"lost {'its answer' if one else 'their answers'}, so whether its attempts were "
        "used up cannot be told"
    )
