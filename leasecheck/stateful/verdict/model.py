"""The independent oracle: who should own each job, judged from the history alone.

It never calls or imports the implementation under test. It is told what the
queue answered and when (in commit order), and it says which property an answer
breaks. Times are simulated seconds since the start of the example; leases are
half-open intervals [granted, end).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import FAILED, RUNNING, Claim, JobId
from leasecheck.stateful.properties import Violation
from leasecheck.stateful.units import stamp
from leasecheck.stateful.verdict import caps, drain, releases, renewals, window
from leasecheck.stateful.verdict.grants import Grant, JobModel, Mark, Pending, Refusal
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
        self.effects = Effects(self.ledger)

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

        A claim answered after it was in flight (`sent`: its call) may have taken the
        job before or after the grants told meanwhile: its token order and lease are
        checked against the grants told before it was sent, and the rest is said to
        be unjudged, never guessed. It took the job at some moment between `at` (sent)
        and `answered_at`: an earlier lease breaks exclusive-lease only if it held
        over that whole stretch."""
        job = self.job(claim)
        start = at if lease_from is None else lease_from
        new = Grant(claim=claim, label=label, granted_at=at, lease_end=start + self.lease)
        new.seq, self.told = self.told, self.told + 1
        answered = answered_at if sent is not None and answered_at is not None else at
        new.told, self.moments = Mark(self.moments, answered), self.moments + 1
        jobs = (job.label,)
        since = self.in_flight.told_when_sent.get(sent, new.seq) if sent is not None else new.seq
        meanwhile = [g for g in job.grants if g.seq >= since]
        earlier = [g for g in job.grants if g.seq < since]
        if meanwhile:
            self.ledger.unjudged.append(
                f"{label} answered after {', '.join(g.label for g in meanwhile)} of "
                f"{job.label} was granted while its claim was in flight: which came first, "
                "and so their token order, their leases against each other and which of "
                "them owns the job, cannot be told"
            )
        if any(not g.released for g in job.grants):
            self.ledger.saw("expired lease claimed again")
        caps.seen(self, job)
        done_since = (
            self.in_flight.done_when_sent.get(sent, self.done_told) if sent is not None else None
        )
        done_before = [g for g in job.completed_by if done_since is None or _done(g) < done_since]
        if done_before:
            self.ledger.flag(
                P.NO_LOST_JOBS,
                f"{job.label} was handed out again ({label}) after the queue had accepted "
                "its completion",
                *(g.label for g in done_before),
                jobs=jobs,
                grants=(label, *(g.label for g in done_before)),
            )
        elif job.finished:
            self.ledger.unjudged.append(
                f"{label} answered after the completion of "
                f"{', '.join(g.label for g in job.completed_by)} was accepted while its claim "
                "was in flight: it may have taken the job before that completion committed"
            )
        if claim.token in job.tokens:
            self.ledger.flag(
                P.FENCING,
                f"{label} carries token {claim.token!r}, already handed out for {job.label}",
                jobs=jobs,
                grants=(label,),
            )
        elif self.ordered_tokens and earlier and not _greater(claim.token, earlier[-1].claim.token):
            self.ledger.flag(
                P.FENCING,
                f"{label} carries token {claim.token!r}, not greater than "
                f"{earlier[-1].claim.token!r} although the queue declares ordered tokens",
                jobs=jobs,
                grants=(label, earlier[-1].label),
            )
        latest = answered_at if sent is not None and answered_at is not None else at
        when = f"at t={stamp(at)}"
        if latest != at:
            when = f"between t={stamp(at)} and t={stamp(latest)} (its claim was in flight)"
        for other in earlier:
            held_until = _lease_end_as_of(other, at)  # a later renewal may come after the grant
            if not other.released and held_until > latest:
                said = (
                    f"{label} was granted {when} while "
                    f"{other.label} held a lease until t={stamp(held_until)}"
                )
                verdict = Violation(P.EXCLUSIVE_LEASE, said, jobs=jobs, grants=(label, other.label))
                if not releases.pending(self.ledger, other, said, latest, verdict):
                    self.ledger.flag_violation(verdict)
        caps.judge(self, job, label, sent)
        self.effects.note_key(job, key, label)
        job.grants.append(new)
        job.tokens.append(claim.token)
        # A grant told with none meanwhile came after every grant told before it: it owns
        # the job for sure. Otherwise the owner is one of the grants that raced.
        job.unsure = [*dict.fromkeys([*job.unsure, *meanwhile, new])] if meanwhile else []
        job.unseen = False
        return new

    def _unsure(self, job: JobModel, grant: Grant, what: str, accepted: bool) -> bool:
        """Say, and return, whether who owns the job cannot be told for `grant`'s call:
        it is among grants whose order is unknown, or it was the owner before a claim that
        lost its answer may have taken the job. Then whether the call was the owner's or
        a stale one is unknown, and neither its acceptance nor its refusal is judged."""
        answer = "accepted" if accepted else "refused"
        if grant in job.unsure:
            others = ", ".join(g.label for g in job.unsure if g is not grant)
            self.ledger.unjudged.append(
                f"the {what} of {grant.label} was {answer}: whether it or {others} owns "
                f"{job.label} cannot be told (their claims raced, one in flight)"
            )
            return True
        if job.unseen and grant is self.owner(job):
            self.ledger.unjudged.append(
                f"the {what} of {grant.label} was {answer}: a claim that lost its answer "
                f"may have taken {job.label} since, so whether it still owns it cannot be told"
            )
            return True
        return False

    def _refused(self, grant: Grant, what: str, at: int, raised: str | None = None) -> None:
        """Judge the owner's call that the queue refused at `at`.

        The current owner (its lease unexpired) is never refused. A late owner, whose
        lease ran out but whom nobody replaced, is refused rightly only when the queue
        shows it gave the job up at its cap, or declares that its recovery revokes
        expired leases (then the refusal is its design, said but not judged).
        """
        job = self.job(grant.claim)
        how = f"refused (it raised {raised})" if raised else "refused"
        said = f"the {what} of {grant.label}, which owns {job.label}, was {how} at t={stamp(at)}"
        if releases.pending(self.ledger, grant, said, at, Refusal(grant, what, at, raised)):
            return
        refs = {"jobs": (job.label,), "grants": (grant.label,)}
        if grant.lease_end > at:
            self.ledger.flag(
                P.OWNER_PROGRESS,
                said,
                f"its lease ran until t={stamp(grant.lease_end)} and nobody else was granted "
                f"{job.label}",
                *_serialization(raised),
                **refs,
            )
            return
        late = f"{said}, after its lease ended at t={stamp(grant.lease_end)}"
        if self.revokes_expired:
            self.ledger.declared.append(f"{late}: the queue declares revokes_expired")
            return
        if self.observe is None:
            self.ledger.unjudged.append(f"{late}: without state() it cannot be told from giving up")
            return
        status = self.observe(grant.claim.job_id)
        if status == FAILED and caps.exhausted(self, job):
            return  # given up at its cap, as the queue's own table shows
        if status == FAILED and caps.may_be_exhausted(self, job):
            self.ledger.unjudged.append(f"{late}: {caps.lost_attempts(self, job)}")
            return

        why = f"nobody else was granted {job.label}; the queue shows it {status}"
        verdict = Violation(P.LATE_OWNER, late, (why,), **refs)
        # A claim whose statement ran but whose answer has not come back (it waits
        # between statements, or on a lock) may have taken the job already.
        if not self.in_flight.wait(grant.claim.job_id, late, verdict):
            self.ledger.flag_violation(verdict)

    def _settled(self, waited: list[Pending]) -> None:
        """Judge the verdicts that waited on a release the queue refused: the grant still
        held the job, so each is told, or its refusal judged again."""
        for verdict in waited:
            if isinstance(verdict, Refusal):
                self._refused(verdict.grant, verdict.what, verdict.at, verdict.raised)
            else:
                self.ledger.flag_violation(verdict)

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
        releases.lost(self.ledger, grant, op, at)

    def claim_sent(self, call: int) -> None:
        """A claim call was sent and has not answered: late owners wait for its answer."""
        self.in_flight.sent(call, self.told, self.done_told, self.failed_told)

    def claim_answered(self, call: int, jobs: list[JobId], known: bool) -> None:
        """The claim call `call` answered with `jobs` (`stateful.verdict.inflight`)."""
        self.in_flight.answered(call, jobs, known, self.jobs, self.ledger)

    def external_effect(self, grant: Grant, key: str) -> bool:
        """Deliver an effect to the deduplicating receiver; return whether it took it."""
        return self.effects.deliver(self.job(grant.claim), grant, key)

    def effect_rows(
        self, rows: Iterable[tuple[int, str, str, str]], refused: set[int], voided: set[int]
    ) -> None:
        """Judge the effect rows committed so far (the ground truth in the database)."""
        labels = {str(k): m.label for k, m in self.jobs.items()}
        self.effects.judge_rows(rows, refused, voided, labels)

    def drained(self) -> None:
        """Judge no-lost-jobs and done-effect, once healing and a full drain are over."""
        drain.judge(self)

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
        is fenced by its window (`_accepted_not_owning`).
        """
        job = self.job(grant.claim)
        if self._unsure(job, grant, "heartbeat", accepted):
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
                self._refused(grant, "heartbeat", sent.answered, raised)
        elif accepted:
            said = self._accepted_not_owning(job, grant, "heartbeat", win, sent, lease_from)
            if said is not None:
                self.ledger.flag_violation(said)

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
        self._settled(releases.answered(self.ledger, grant, "completion", accepted))
        job = self.job(grant.claim)
        unsure = self._unsure(job, grant, "completion", accepted)
        win = None if unsure else self._window(job, grant, sent, "completion")
        if not accepted and not self.answers_complete:
            self.ledger.saw("completion refused")  # atomic-rejection: judged from the rows alike
        if win is None:
            if accepted and self.answers_complete and job.completed_by:
                self.ledger.flag(  # two accepted completions, whoever owned the job
                    P.SINGLE_COMPLETION,
                    f"the queue accepted {len(job.completed_by) + 1} completions of {job.label}",
                    *(f"accepted: {g.label}" for g in [*job.completed_by, grant]),
                    jobs=(job.label,),
                    grants=(grant.label, *(g.label for g in job.completed_by)),
                )
        elif win.owner:
            if not accepted:
                self._refused(grant, "completion", sent.answered, raised)
        elif accepted:
            stale = self._accepted_not_owning(job, grant, "completion", win, sent)
            if self.answers_complete and job.completed_by:
                self.ledger.flag(
                    P.SINGLE_COMPLETION,
                    f"the queue accepted {len(job.completed_by) + 1} completions of {job.label}",
                    *(f"accepted: {g.label}" for g in [*job.completed_by, grant]),
                    jobs=(job.label,),
                    grants=(grant.label, *(g.label for g in job.completed_by)),
                )
            elif stale is not None:
                # Reported at the end of the example unless it led to a double completion,
                # which single-completion then reports with the whole story.
                self.ledger.deferred.append(stale)
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
        self._settled(releases.answered(self.ledger, grant, "failure report", accepted))
        job = self.job(grant.claim)
        if accepted:  # what a cap on failures counts, whoever sent it
            job.failed.append(self.failed_told)
            self.failed_told += 1
        if self._unsure(job, grant, "failure report", accepted):
            if accepted:
                self._gone(grant, sent.answered)
            return
        win = self._window(job, grant, sent, "failure report")
        if win.owner:
            if accepted:
                self._gone(grant, sent.answered)
            else:
                self._refused(grant, "failure report", sent.answered, raised)
        elif accepted:
            stale = self._accepted_not_owning(job, grant, "failure report", win, sent)
            if stale is None:
                self._gone(grant, sent.answered)  # it may have given the job back first
            else:
                self.ledger.flag_violation(stale)

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

    def _accepted_not_owning(
        self,
        job: JobModel,
        grant: Grant,
        what: str,
        win: Window,
        sent: Sent,
        lease_from: int | None = None,
    ) -> Violation | None:
        """Return the fencing violation of `grant`'s accepted call (`what`), which does not
        own the job now, or None when some placement of the call in its window breaks
        nothing (said in `unjudged`).

        Sent after its job was taken from it (`win.before`), the call is stale wherever it
        landed. Sent while it still owned the job, it may have landed before what took the
        job (`win.during`): only what that placement would mean, or what the queue shows
        now, can convict it. A failure report that came first gave the job back and broke
        nothing, unless the queue shows the job given up under the grant that holds it now
        (`_landed_after`). A completion that came first finished a job the queue then
        handed out again, a break either way. A heartbeat that came first renewed a lease
        the next grant then broke, if that grant came before even the earliest renewal
        could run out.
        """
        when = _when(sent.at, sent.answered)
        refs = {"jobs": (job.label,), "grants": (grant.label, *_others(job, grant))}
        stale = f"the {what} of stale {grant.label} was accepted {when}"
        if win.before:
            why = window.why_stale(job, grant, win)
            return Violation(P.FENCING, stale, (why,), **refs)
        first = win.during[0]
        sent_while = (
            f"it was sent at t={stamp(sent.at)} while {grant.label} still owned {job.label}"
        )
        later = win.first_grant()
        if later is not None and what != "heartbeat":
            shown = self._landed_after(job, grant, win, sent)
            if shown is not None:
                granted = f"{later.by.label} was granted {job.label} while it was in flight"
                return Violation(P.FENCING, stale, (f"{sent_while}; {granted}", shown), **refs)
        either = "either way a property broke"
        if later is not None and what == "completion":
            said = (
                f"the completion of {grant.label} was accepted {when}, although "
                f"{later.by.label} was granted {job.label} while it was in flight"
            )
            why = (
                f"{sent_while}: had it committed first, {job.label} was handed out again "
                f"after its completion was accepted (no-lost-jobs); had it come after, a "
                f"stale completion was accepted; {either}"
            )
            return Violation(P.FENCING, said, (why,), **refs)
        if first.kind == "granted" and what == "heartbeat" and not _releasing(grant):
            renewed = (sent.at if lease_from is None else lease_from) + self.lease
            if first.mark.instant < renewed:
                said = (
                    f"the heartbeat of {grant.label} was accepted {when}, although "
                    f"{first.by.label} was granted {job.label} while it was in flight"
                )
                why = (
                    f"{sent_while}: had it landed first, {first.by.label} took {job.label} by "
                    f"t={stamp(first.mark.instant)} under the lease it renewed until at "
                    f"least t={stamp(renewed)} (exclusive-lease); had it come after, a stale "
                    f"heartbeat was accepted; {either}"
                )
                return Violation(P.FENCING, said, (why,), **refs)
        took = {
            "granted": f"{first.by.label} was granted {job.label}",
            "completed": f"{first.by.label} completed {job.label}",
            "released": f"its own release of {job.label} was accepted",
        }[first.kind]
        self.ledger.unjudged.append(
            f"the {what} of {grant.label} was accepted {when} after {took}; {sent_while}, so "
            "it may have landed first, where it broke nothing: whether it was stale cannot "
            "be told"
        )
        return None

    def _landed_after(self, job: JobModel, grant: Grant, win: Window, sent: Sent) -> str | None:
        """Return what the queue shows that places `grant`'s accepted release after the
        grant that holds its job now, or None if nothing does.

        Had the release landed first, the later grant took the job afterwards and holds
        it: the queue would show it running. It shows something else while that grant's
        lease runs and nothing of that grant's may have given it back (no release in
        flight, none that lost its answer): the release came after the claim, and undid
        it. Without `state()` nothing shows it."""
        holder = self.owner(job)
        granted = [c.by for c in win.during if c.kind == "granted"]
        if self.observe is None or holder is None or holder not in granted or job.unsure:
            return None
        if holder.lease_end <= sent.answered or _releasing(holder):
            return None
        status = self.observe(grant.claim.job_id)
        if status == RUNNING:
            return None
        return (
            f"the queue shows {job.label} {status} after it answered, while "
            f"{holder.label}'s lease runs until t={stamp(holder.lease_end)}: it landed "
            f"after {holder.label}'s claim and undid it"
        )

    def _gone(self, grant: Grant, at: int) -> None:
        """`grant`'s completion or failure report, answered at `at`, was accepted: it gave
        its job back (an ownership change, told now)."""
        grant.released = True
        grant.gone, self.moments = Mark(self.moments, at), self.moments + 1


def _lease_end_as_of(grant: Grant, t: int) -> int:
    """Return when `grant`'s lease ended as it stood at `t`, before any later renewal."""
    for when, replaced in grant.renewals:
        if when > t:
            return replaced
    return grant.lease_end


def _greater(a: Hashable, b: Hashable) -> bool:
    try:
        return bool(a > b)  # type: ignore[operator]
    except TypeError:
        return False


def _when(at: int, answered: int | None) -> str:
    """Say when a call was accepted: when sent, and when answered if it waited."""
    if answered is None or answered == at:
        return f"at t={stamp(at)}"
    return f"at t={stamp(answered)} (sent at t={stamp(at)}, it waited or was paused)"


def _others(job: JobModel, grant: Grant) -> tuple[str, ...]:
    """Return the grants a stale call wronged: who completed the job, or who holds it now."""
    if job.completed_by:
        return tuple(g.label for g in job.completed_by if g is not grant)
    later = job.grants[-1]
    return () if later is grant else (later.label,)


def _releasing(grant: Grant) -> bool:
    """Return whether a release of `grant` may have given its job back unseen: one in
    flight, or one that lost its answer."""
    return grant.releasing is not None or grant.released_unknown is not None


def _done(grant: Grant) -> int:
    assert grant.done is not None, grant.label  # only accepted completions are asked
    return grant.done


def _serialization(raised: str | None) -> tuple[str, ...]:
    """Return what to say of a refusal that was PostgreSQL's serialization failure: the
    queue let a transaction above READ COMMITTED fail rather than retry it, which is a
    design choice a queue may document (its callers retry), not a lost lease."""
    if raised is None or not any(m in raised for m in _SERIALIZATION):
        return ()
    return (
        "PostgreSQL refused it with a serialization failure (40001), as it may above READ "
        "COMMITTED, and the queue answered no rather than retry; if the queue's callers "
        "retry such a call, run with --leasecheck-excuse owner-progress",
    )


_SERIALIZATION = ("SerializationFailure", "could not serialize")
