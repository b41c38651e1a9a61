"""The independent oracle: who should own each job, judged from the history alone.

It never calls or imports the implementation under test. It is told what the
queue answered and when (in commit order), and it says which property an answer
breaks. Times are simulated seconds since the start of the example; leases are
half-open intervals [granted, end).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import Claim, JobId
from leasecheck.stateful.properties import Violation


@dataclass(eq=False)
class Grant:
    """One claim the queue handed out and the oracle accepted as committed."""

    claim: Claim
    label: str
    granted_at: int
    lease_end: int
    released: bool = False


@dataclass
class JobModel:
    """What the oracle knows about one job."""

    label: str
    grants: list[Grant] = field(default_factory=list)
    tokens: list[Hashable] = field(default_factory=list)
    completed_by: list[Grant] = field(default_factory=list)
    failed_final: bool = False
    effect_keys: set[str] = field(default_factory=set)
    effects_accepted: int = 0

    @property
    def finished(self) -> bool:
        return bool(self.completed_by) or self.failed_final


@dataclass
class Oracle:
    """Judges each answer of the queue against the properties."""

    lease: int
    max_attempts: int | None
    ordered_tokens: bool
    jobs: dict[JobId, JobModel] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    deferred: list[Violation] = field(default_factory=list)
    receiver: dict[str, JobId] = field(default_factory=dict)

    def _flag(self, prop: str, message: str, *evidence: str) -> None:
        self.violations.append(Violation(prop, message, tuple(evidence)))

    def enqueued(self, job_id: JobId, label: str) -> None:
        self.jobs[job_id] = JobModel(label=label)

    def job(self, claim: Claim) -> JobModel:
        try:
            return self.jobs[claim.job_id]
        except KeyError:
            raise AssertionError(
                f"the queue handed out job id {claim.job_id!r}, which was never enqueued"
            ) from None

    def owner(self, job: JobModel) -> Grant | None:
        """Return the grant that owns the job now: the latest one, unless released or finished."""
        if not job.grants or job.finished:
            return None
        latest = job.grants[-1]
        return None if latest.released else latest

    def grant(self, claim: Claim, label: str, at: int, key: str) -> Grant:
        """Record a committed claim and check it against every earlier one of its job."""
        job = self.job(claim)
        new = Grant(claim=claim, label=label, granted_at=at, lease_end=at + self.lease)
        if job.finished:
            self._flag(
                P.NO_LOST_JOBS,
                f"{job.label} was handed out again ({label}) after it had finished",
                *(g.label for g in job.completed_by),
            )
        if claim.token in job.tokens:
            self._flag(
                P.FENCING,
                f"{label} carries token {claim.token!r}, already handed out for {job.label}",
            )
        elif self.ordered_tokens and job.tokens and not _greater(claim.token, job.tokens[-1]):
            self._flag(
                P.FENCING,
                f"{label} carries token {claim.token!r}, not greater than "
                f"{job.tokens[-1]!r} although the queue declares ordered tokens",
            )
        for other in job.grants:
            if not other.released and other.lease_end > at:
                self._flag(
                    P.EXCLUSIVE_LEASE,
                    f"{label} was granted at t={at / 1e6:g}s while "
                    f"{other.label} held a lease until t={other.lease_end / 1e6:g}s",
                )
        if self.max_attempts is not None and len(job.grants) + 1 > self.max_attempts:
            self._flag(
                P.RETRY_CAP,
                f"{job.label} claimed {len(job.grants) + 1} times; "
                f"the queue promises at most {self.max_attempts}",
            )
        self._note_key(job, key)
        job.grants.append(new)
        job.tokens.append(claim.token)
        return new

    def _given_up(self, job: JobModel, grant: Grant, at: int) -> bool:
        """Return whether the queue may have failed the job for good under its owner.

        On the last attempt, a lease that ran out lets the queue give the job up
        (the retry cap's reaper); refusing the late owner then is not a violation.
        """
        if self.exhausted(job) and grant.lease_end <= at:
            job.failed_final = True
            return True
        return False

    def _note_key(self, job: JobModel, key: str) -> None:
        """Record an idempotency key of the job; it must never change between attempts."""
        job.effect_keys.add(key)
        if len(job.effect_keys) > 1:
            self._flag(
                P.UNIQUE_EFFECTS,
                f"the idempotency key of {job.label} changed between attempts: "
                f"{sorted(job.effect_keys)}",
            )

    def heartbeat(self, grant: Grant, accepted: bool, at: int) -> None:
        job = self.job(grant.claim)
        if grant is self.owner(job):
            if accepted:
                grant.lease_end = at + self.lease
            elif not self._given_up(job, grant, at):
                self._flag(
                    P.OWNER_PROGRESS,
                    f"the heartbeat of {grant.label}, which owns "
                    f"{job.label}, was refused at t={at / 1e6:g}s",
                )
        elif accepted:
            self._flag(
                P.FENCING,
                f"the heartbeat of stale {grant.label} was accepted at t={at / 1e6:g}s",
                _why_stale(job, grant),
            )

    def complete(self, grant: Grant, accepted: bool, at: int) -> None:
        job = self.job(grant.claim)
        if grant is self.owner(job):
            if not accepted and not self._given_up(job, grant, at):
                self._flag(
                    P.OWNER_PROGRESS,
                    f"the completion of {grant.label}, which owns "
                    f"{job.label}, was refused at t={at / 1e6:g}s",
                )
        elif accepted:
            # Reported at the end of the example unless it led to a double completion,
            # which single-completion then reports with the whole story.
            self.deferred.append(
                Violation(
                    P.FENCING,
                    f"the completion of stale {grant.label} was accepted at t={at / 1e6:g}s",
                    (_why_stale(job, grant),),
                )
            )
        if accepted:
            grant.released = True
            job.completed_by.append(grant)

    def fail(self, grant: Grant, accepted: bool, at: int) -> None:
        job = self.job(grant.claim)
        if grant is self.owner(job):
            if not accepted:
                if self._given_up(job, grant, at):
                    return
                self._flag(
                    P.OWNER_PROGRESS,
                    f"the failure report of {grant.label}, which owns "
                    f"{job.label}, was refused at t={at / 1e6:g}s",
                )
                return
            grant.released = True
            if self.max_attempts is not None and len(job.grants) >= self.max_attempts:
                job.failed_final = True
        elif accepted:
            self._flag(
                P.FENCING,
                f"the failure report of stale {grant.label} was accepted at t={at / 1e6:g}s",
                _why_stale(job, grant),
            )

    def external_effect(self, grant: Grant, key: str) -> bool:
        """Deliver an effect to the deduplicating receiver; return whether it took it."""
        job = self.job(grant.claim)
        self._note_key(job, key)
        if key in self.receiver:
            return False
        self.receiver[key] = grant.claim.job_id
        job.effects_accepted += 1
        if job.effects_accepted > 1:
            self._flag(
                P.UNIQUE_EFFECTS,
                f"the receiver accepted {job.effects_accepted} effects "
                f"for {job.label}; the last from {grant.label} with key {key!r}",
            )
        return True

    def exhausted(self, job: JobModel) -> bool:
        """Return whether the job used every attempt it was promised."""
        return self.max_attempts is not None and len(job.grants) >= self.max_attempts

    def lost_jobs(self) -> list[str]:
        """Return the jobs that are neither done once nor failed for good (after a drain)."""
        lost = []
        for job in self.jobs.values():
            if len(job.completed_by) == 1 or (not job.completed_by and self.exhausted(job)):
                continue
            if job.failed_final and not job.completed_by:
                continue
            done = ", ".join(g.label for g in job.completed_by) or "nobody"
            lost.append(f"{job.label}: {len(job.grants)} claims, completed by {done}")
        return lost


def _greater(a: Hashable, b: Hashable) -> bool:
    try:
        return bool(a > b)  # type: ignore[operator]
    except TypeError:
        return False


def _why_stale(job: JobModel, grant: Grant) -> str:
    if job.completed_by:
        return f"{job.label} was already completed by {job.completed_by[0].label}"
    if grant.released:
        return f"{grant.label} had already released {job.label}"
    later = job.grants[-1]
    return f"{job.label} had been granted again to {later.label} at t={later.granted_at / 1e6:g}s"
