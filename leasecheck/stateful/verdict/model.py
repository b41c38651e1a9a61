"""The independent oracle: who should own each job, judged from the history alone.

It never calls or imports the implementation under test. It is told what the
queue answered and when (in commit order), and it says which property an answer
breaks. Times are simulated seconds since the start of the example; leases are
half-open intervals [granted, end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import Claim, JobId
from leasecheck.stateful.verdict import (
    caps,
    claims,
    drain,
    refusals,
    releases,
    renewals,
    stale,
    window,
)
from leasecheck.stateful.verdict.findings import Deferred, Unjudged, Violation
from leasecheck.stateful.verdict.grants import Grant, JobModel, Mark, Pending
from leasecheck.stateful.verdict.hidden import Doubts
from leasecheck.stateful.verdict.inflight import InFlight
from leasecheck.stateful.verdict.ledger import Ledger
from leasecheck.stateful.verdict.receiver import Effects
from leasecheck.stateful.verdict.window import Sent, Window

Observe = Callable[[JobId], str]
"""Reads a job's status from the queue's own tables (the contract's `state`)."""


@dataclass
class Oracle:
    """Judges each answer of the queue against the properties.

    Finality is never inferred from claim counts: the queue's own `state` (through
    `observe`) says whether a job is done or failed; without it, what needs it goes
    unjudged and is listed in `unjudged`.
    """

    lease: int
    max_attempts: int | None
    ordered_tokens: bool
    revokes_expired: bool = False
    max_failures: int | None = None
    """The failure reports after which the queue gives a job up (None: no such cap)."""
    answers_complete: bool = False
    """Judge single-completion from accepted answers (the effect runs outside the completion)."""
    renews_worker: bool = False
    """A heartbeat renews every claim of its worker (`stateful.verdict.renewals`)."""
    observe: Observe | None = None
    jobs: dict[JobId, JobModel] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)
    """What it has said: verdicts, and what it could not judge (`stateful.verdict.ledger`)."""
    in_flight: InFlight = field(default_factory=InFlight)
    """Claims sent and not answered yet (`stateful.verdict.inflight`)."""
    effects: Effects = field(init=False)
    """The receiver, the keys and the effect rows (`stateful.verdict.receiver`)."""
    told: int = 0
    """Grants told so far."""
    done_told: int = 0
    """Accepted completions told so far."""
    failed_told: int = 0
    """Accepted failure reports told so far."""
    moments: int = 0
    """Ownership changes told so far (grants and accepted releases): the order in which
    a call's window is laid against them (`stateful.verdict.window`)."""
    shown: dict[JobId, str] = field(default_factory=dict)
    """What `state()` showed for each job after the drain (read once, for no-lost-jobs)."""
    doubts: Doubts = field(default_factory=Doubts)
    """Jobs a claim the harness cancelled may hold (no-hidden-claims, `stateful.verdict.hidden`)."""

    def __post_init__(self) -> None:
        self.effects = Effects()

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
        """Return the grant that owns the job now (`JobModel.owner`)."""
        return job.owner

    def grant(
        self,
        claim: Claim,
        label: str,
        at: int,
        key: str,
        sent: int | None = None,
        answered_at: int | None = None,
        lease_from: int | None = None,
    ) -> Grant:
        """Record a committed claim and check it against every earlier one of its job.

        Its lease ends a lease after `lease_from`, the instant its `now()` read, when that
        differs from `at` (a claim inside a transaction held open since then: the lease it
        wrote may even have ended before it was granted).

        A claim answered after it was in flight (`sent`: its call) took the job at some
        moment between `at` (sent) and `answered_at` (`stateful.verdict.claims`)."""
        job = self.job(claim)
        start = at if lease_from is None else lease_from
        new = Grant(claim=claim, label=label, granted_at=at, lease_end=start + self.lease)
        new.seq, self.told = self.told, self.told + 1
        answered = answered_at if sent is not None and answered_at is not None else at
        new.told, self.moments = Mark(self.moments, answered), self.moments + 1
        found, meanwhile = claims.judge(self, job, new, sent, answered)
        self.ledger.take(found)
        self.ledger.take(caps.judge(self, job, label, sent))
        self.ledger.take(self.effects.note_key(job, key, label))
        job.grants.append(new)
        job.tokens.append(claim.token)
        # A grant told with none meanwhile came after every grant told before it: it owns
        # the job for sure. Otherwise the owner is one of the grants that raced.
        job.unsure = [*dict.fromkeys([*job.unsure, *meanwhile, new])] if meanwhile else []
        job.unseen = False
        return new

    def releasing(self, grant: Grant, op: str, at: int) -> None:
        """`grant`'s completion or failure report (`op`), sent at `at`, is in flight
        (`stateful.verdict.releases`)."""
        releases.sent(grant, at)
        grant.release_moment = self.moments  # what is told from now on may follow the send
        self.ledger.saw("release in flight")

    def release_unknown(self, grant: Grant, op: str, at: int) -> None:
        """`grant`'s report (`op`), sent at `at`, lost its answer (`stateful.verdict.releases`)."""
        grant.release_moment = None
        if op == "fail":
            self.job(grant.claim).failures_unknown += 1
        self.ledger.take(releases.lost(grant, op, at))

    def claim_sent(self, call: int) -> None:
        """A claim call was sent and has not answered: late owners wait for its answer."""
        self.in_flight.sent(call, self.told, self.done_told, self.failed_told)

    def claim_answered(self, call: int, jobs: list[JobId], known: bool) -> None:
        """The claim call `call` answered with `jobs` (`stateful.verdict.inflight`)."""
        self.ledger.take(self.in_flight.answered(call, jobs, known, self.jobs))

    def external_effect(self, grant: Grant, key: str) -> bool:
        """Deliver an effect to the deduplicating receiver; return whether it took it."""
        took, found = self.effects.deliver(self.job(grant.claim), grant, key)
        self.ledger.take(found)
        return took

    def effect_rows(
        self, rows: Iterable[tuple[int, str, str, str]], refused: set[int], voided: set[int]
    ) -> None:
        """Judge the effect rows committed so far (the ground truth in the database)."""
        labels = {str(k): m.label for k, m in self.jobs.items()}
        self.ledger.take(self.effects.judge_rows(rows, refused, voided, labels))

    def drained(self) -> None:
        """Judge no-lost-jobs and done-effect, once healing and a full drain are over."""
        self.ledger.take(drain.judge(self))

    def heartbeat(
        self,
        grant: Grant,
        accepted: bool,
        at: int,
        answered: int | None = None,
        raised: str | None = None,
        lease_from: int | None = None,
    ) -> None:
        """Judge a heartbeat sent at `at` and answered at `answered` (later, if it waited).

        An extension counts from when it was sent (the statement's `now()`), or from
        `lease_from` inside a transaction held open since then (its `now()`); a refusal
        is judged when it came: a call that waited on a lock meets the queue as it is
        when the lock is let go, and the lease may have run out meanwhile. An acceptance
        is fenced by its window (`stateful.verdict.stale`).
        """
        job = self.job(grant.claim)
        unsure = refusals.unsure(job, grant, "heartbeat", accepted)
        if unsure is not None:
            self.ledger.take(unsure)
            return
        sent = self._sent(grant, at, answered, release=False)
        win = self._window(job, grant, sent, "heartbeat")
        if win.owner:
            if accepted:
                base = at if lease_from is None else lease_from
                grant.renewals.append((at, grant.lease_end))
                grant.lease_end = base + self.lease
                if self.renews_worker:
                    renewals.worker(self, grant, at, sent.answered, base + self.lease)
            else:
                self.ledger.take(refusals.refused(self, grant, "heartbeat", sent.answered, raised))
        elif accepted:
            self.ledger.take([stale.accepted(self, job, grant, "heartbeat", win, sent, lease_from)])

    def complete(
        self,
        grant: Grant,
        accepted: bool,
        at: int,
        answered: int | None = None,
        raised: str | None = None,
    ) -> None:
        """Judge a completion; a refusal when it was answered (see `heartbeat`)."""
        sent = self._sent(grant, at, answered, release=True)
        self._settled(releases.answered(grant, "completion", accepted))
        job = self.job(grant.claim)
        unsure = refusals.unsure(job, grant, "completion", accepted)
        self.ledger.take(unsure or [])
        win = None if unsure is not None else self._window(job, grant, sent, "completion")
        if not accepted and not self.answers_complete:
            self.ledger.saw("completion refused")  # atomic-rejection: judged from the rows alike
        if win is None:
            if accepted and self.answers_complete and job.completed_by:
                self.ledger.flag_violation(_twice(job, grant))  # whoever owned the job
        elif win.owner:
            if not accepted:
                self.ledger.take(refusals.refused(self, grant, "completion", sent.answered, raised))
        elif accepted:
            found = stale.accepted(self, job, grant, "completion", win, sent)
            if isinstance(found, Unjudged):
                self.ledger.take([found])
            if self.answers_complete and job.completed_by:
                self.ledger.flag_violation(_twice(job, grant))
            elif isinstance(found, Violation):
                # Reported at the end of the example unless it led to a double completion,
                # which single-completion then reports with the whole story.
                self.ledger.take([Deferred(found)])
        if accepted:
            self._gone(grant, sent.answered)
            grant.done, self.done_told = self.done_told, self.done_told + 1
            job.completed_by.append(grant)

    def fail(
        self,
        grant: Grant,
        accepted: bool,
        at: int,
        answered: int | None = None,
        raised: str | None = None,
    ) -> None:
        """Judge a failure report; a refusal when it was answered (see `heartbeat`)."""
        sent = self._sent(grant, at, answered, release=True)
        self._settled(releases.answered(grant, "failure report", accepted))
        job = self.job(grant.claim)
        if accepted:  # what a cap on failures counts, whoever sent it
            job.failed.append(self.failed_told)
            self.failed_told += 1
        unsure = refusals.unsure(job, grant, "failure report", accepted)
        if unsure is not None:
            self.ledger.take(unsure)
            if accepted:
                self._gone(grant, sent.answered)
            return
        win = self._window(job, grant, sent, "failure report")
        if win.owner:
            if accepted:
                self._gone(grant, sent.answered)
            else:
                self.ledger.take(
                    refusals.refused(self, grant, "failure report", sent.answered, raised)
                )
        elif accepted:
            found = stale.accepted(self, job, grant, "failure report", win, sent)
            self.ledger.take([found])
            if isinstance(found, Unjudged):
                self._gone(grant, sent.answered)  # it may have given the job back first

    def _settled(self, waited: list[Pending | Unjudged]) -> None:
        """Judge what waited on a release that answered (`stateful.verdict.refusals`)."""
        self.ledger.take(refusals.settled(self, waited))

    # ------------------------------------------------------------- windows

    def _sent(self, grant: Grant, at: int, answered: int | None, *, release: bool) -> Sent:
        """Return the window of `grant`'s call sent at `at`. A release told in flight when
        it was sent (`releasing`, the same call if sent at the same instant) places its
        send among the ownership changes exactly; the place is used once."""
        moment = None
        if release:
            if grant.releasing == at:
                moment = grant.release_moment
            grant.release_moment = None
        return Sent(at=at, answered=at if answered is None else answered, moment=moment)

    def _window(self, job: JobModel, grant: Grant, sent: Sent, what: str) -> Window:
        """Lay `grant`'s call (`what`) against what took its job from it, and count the
        situation the call was in when it was sent."""
        win = window.place(job, grant, sent, own_release_first=what != "heartbeat")
        if win.before:
            self.ledger.saw(f"stale {what} sent")
        elif grant.lease_end <= sent.at:
            self.ledger.saw("late owner's call")
        else:
            self.ledger.saw("owner's call refused or accepted")
            if sent.answered != sent.at:
                self.ledger.saw("owner's call answered after a wait")
        return win

    def _gone(self, grant: Grant, at: int) -> None:
        """`grant`'s completion or failure report, answered at `at`, was accepted: it gave
        its job back (an ownership change, told now)."""
        grant.released = True
        grant.gone, self.moments = Mark(self.moments, at), self.moments + 1


def _twice(job: JobModel, grant: Grant) -> Violation:
    """Return single-completion's verdict on `grant`'s completion, accepted after others
    of its job (judged from answers, for a queue whose effect runs outside it)."""
    return Violation(
        P.SINGLE_COMPLETION,
        f"the queue accepted {len(job.completed_by) + 1} completions of {job.label}",
        tuple(f"accepted: {g.label}" for g in [*job.completed_by, grant]),
        (job.label,),
        (grant.label, *(g.label for g in job.completed_by)),
    )
