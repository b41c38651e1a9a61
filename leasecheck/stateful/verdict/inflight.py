"""Claims in flight: sent, not answered yet, and the verdicts that wait for them.

A claim paused between its statements, or blocked on a lock, may already have
taken a job. Until it answers, a late owner's refusal cannot be judged (the claim
may have handed the job out again rightly), and a grant it answers later is judged
only against the grants told before it was sent. A claim that loses its answer may
have taken any unfinished job, and used one of its attempts, unseen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leasecheck.stateful.contract import JobId
from leasecheck.stateful.properties import Violation
from leasecheck.stateful.verdict.findings import Finding, Unjudged
from leasecheck.stateful.verdict.grants import JobModel


@dataclass
class Waiting:
    """A late owner's refusal that waits for the claims in flight when it was answered."""

    job_id: JobId
    said: str
    calls: set[int]
    verdict: Violation
    """Told if none of the claims in flight hands the job out again."""


@dataclass
class InFlight:
    """The claim calls in flight, what was told when each was sent, and who waits on them."""

    calls: set[int] = field(default_factory=set)
    told_when_sent: dict[int, int] = field(default_factory=dict)
    """For each claim call in flight, how many grants had been told when it was sent."""
    done_when_sent: dict[int, int] = field(default_factory=dict)
    """For each claim call in flight, how many accepted completions had been told then."""
    failed_when_sent: dict[int, int] = field(default_factory=dict)
    """For each claim call in flight, how many accepted failure reports had been told then."""
    lost: int = 0
    """Claim calls in flight whose answer was lost (connection gone, call cancelled):
    each may have taken a job, and so used one of its attempts, unseen."""
    waiting: list[Waiting] = field(default_factory=list)
    """Late owners refused while claims were in flight, judged once those have answered."""

    def sent(self, call: int, told: int, done_told: int, failed_told: int) -> None:
        """Claim call `call` was sent when `told` grants, `done_told` completions and
        `failed_told` failure reports were."""
        self.calls.add(call)
        self.told_when_sent[call] = told
        self.done_when_sent[call] = done_told
        self.failed_when_sent[call] = failed_told

    def wait(self, job_id: JobId, said: str, verdict: Violation) -> bool:
        """Hold the late-owner `verdict` until the claims in flight answer; return
        whether any is in flight (otherwise the caller tells it now)."""
        if not self.calls:
            return False
        self.waiting.append(Waiting(job_id, said, set(self.calls), verdict))
        return True

    def answered(
        self,
        call: int,
        jobs: list[JobId],
        known: bool,
        models: dict[JobId, JobModel],
    ) -> list[Finding]:
        """The claim call `call` answered, handing out `jobs` (`known`: its outcome is
        known; a lost connection or a cancel leaves it unknown).

        A late owner refused while it was in flight was refused rightly if it handed
        the job out again; if none of the claims in flight did, the refusal is told.
        """
        found: list[Finding] = []
        self.calls.discard(call)
        self.told_when_sent.pop(call, None)
        self.done_when_sent.pop(call, None)
        self.failed_when_sent.pop(call, None)
        if not known:
            self.lost += 1
            for job in models.values():  # which job it took, if any, is unknown
                job.unseen = not job.finished
        for w in [w for w in self.waiting if call in w.calls]:
            if not known:
                self.waiting.remove(w)
                found.append(
                    Unjudged(
                        f"{w.said}: a claim in flight then lost its answer, so whether it "
                        "had taken the job cannot be told"
                    )
                )
            elif w.job_id in jobs:
                self.waiting.remove(w)  # handed out again by a claim sent before the refusal
            else:
                w.calls.discard(call)
                if not w.calls:
                    self.waiting.remove(w)
                    found.append(w.verdict)
        return found

    def never_answered(self) -> list[Finding]:
        """After the drain: a refusal still waiting is said, not judged (not expected,
        since the teardown lets every call answer)."""
        waiting, self.waiting = self.waiting, []
        return [Unjudged(f"{w.said}: a claim in flight then never answered") for w in waiting]
