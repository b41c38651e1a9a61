"""The effects a job had: unique-effects, distinct-keys, atomic-rejection, and
single-completion counted from the effect rows.

Two witnesses, one per kind of effect. An effect outside the database goes to a
deduplicating receiver, which takes a key once (so a second effect of one job
under a new key, or two jobs under one key, shows there). An effect inside the
completion's transaction is a row of `leasecheck.effects`, the ground truth in the
database: two rows of one job are two completions, and a row of a call the queue
refused, or of one that rolled back, should not be there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import JobId
from leasecheck.stateful.verdict.findings import Finding, Saw, Violation
from leasecheck.stateful.verdict.grants import Grant, JobModel
from leasecheck.stateful.verdict.keys import KeyOwners


@dataclass
class Effects:
    """What the receiver took, which job each key was first given for, and the rows."""

    receiver: dict[str, JobId] = field(default_factory=dict)
    keys: KeyOwners = field(default_factory=KeyOwners)
    """Which job each idempotency key was first given for (`stateful.verdict.keys`)."""
    rows_seen: dict[str, int] = field(default_factory=dict)
    """Effect rows per job (its id as text) in the latest read of them (done-effect)."""
    held_back: set[JobId] = field(default_factory=set)
    """Jobs whose body's effect the machine held back: its claim had not committed."""

    def note_key(self, job: JobModel, key: str, by: str) -> list[Finding]:
        """Record an idempotency key of the job (carried by grant `by`); it must never
        change between attempts, nor be another job's (`stateful.verdict.keys`)."""
        found: list[Finding] = []
        shared = self.keys.note(key, job.label, by)
        if self.keys.compared:
            found.append(Saw("idempotency keys of distinct jobs compared"))
        if shared is not None:
            found.append(shared)
        job.effect_keys.add(key)
        if len(job.effect_keys) > 1:
            found.append(
                Violation(
                    P.UNIQUE_EFFECTS,
                    f"the idempotency key of {job.label} changed between attempts: "
                    f"{sorted(job.effect_keys)}",
                    jobs=(job.label,),
                )
            )
        return found

    def deliver(self, job: JobModel, grant: Grant, key: str) -> tuple[bool, list[Finding]]:
        """Deliver an effect to the deduplicating receiver; return whether it took it,
        and what that shows."""
        found: list[Finding] = []
        if job.effects_accepted or key in self.receiver:
            found.append(Saw("effect sent for a job again"))
        found += self.note_key(job, key, grant.label)
        if key in self.receiver:
            return False, found
        self.receiver[key] = grant.claim.job_id
        job.effects_accepted += 1
        if job.effects_accepted > 1:
            found.append(
                Violation(
                    P.UNIQUE_EFFECTS,
                    f"the receiver accepted {job.effects_accepted} effects "
                    f"for {job.label}; the last from {grant.label} with key {key!r}",
                    jobs=(job.label,),
                    grants=(grant.label,),
                )
            )
        return True, found

    def judge_rows(
        self,
        rows: Iterable[tuple[int, str, str, str]],
        refused: set[int],
        voided: set[int],
        labels: dict[str, str],
    ) -> list[Finding]:
        """Judge the effect rows committed so far (`labels`: each job's label by its id
        as text). A row is written by the harness's effect inside a completion's
        transaction."""
        found: list[Finding] = []
        by_job: dict[str, list[str]] = {}
        writers: dict[str, list[str]] = {}
        for call_id, job, token, worker in rows:
            by_job.setdefault(job, []).append(
                f"effect row: call {call_id}, {worker}, token {token}"
            )
            writers.setdefault(job, []).append(worker)
            if call_id in refused or call_id in voided:
                found.append(
                    Violation(
                        P.ATOMIC_REJECTION,
                        f"completion call {call_id} of {worker} was "
                        f"{'rolled back' if call_id in voided else 'rejected'} "
                        "but its effect committed",
                        jobs=(labels.get(job, job),),
                        grants=(worker,),
                    )
                )
        self.rows_seen = {job: len(evidence) for job, evidence in by_job.items()}
        for job, evidence in by_job.items():
            if len(evidence) > 1:
                label = labels.get(job, job)
                found.append(
                    Violation(
                        P.SINGLE_COMPLETION,
                        f"{label} completed {len(evidence)} times",
                        tuple(evidence),
                        (label,),
                        tuple(reversed(writers[job])),
                    )
                )
        return found
