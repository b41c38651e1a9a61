"""done-effect: every job the queue shows done had its effect exactly once.

single-completion counts effects per job from above (never two); this is the count
from below. A queue that commits `done` in one transaction and runs the job's effect
in the next (ack-then-work) shows the job done with no effect at all once its worker
dies between the two: no claim count, no completion answer and no other property
sees it, because the only witness is the effect that is missing.

Judged once, after the drain, from what `state()` shows then (every transaction has
ended, every parked call answered): a job shown done must have an effect. Where the
effect is transactional the ground truth is the rows of `leasecheck.effects` (the
harness's effect, written inside the completion's transaction); more than one row is
single-completion's verdict, so this one flags none. Where the queue runs the body
outside its completion (`transactional_effects = False`) it is the receiver: a job
shown done must have had an effect accepted. The one case not judged is said: a body
whose effect the machine held back because its claim had not committed yet (a claim
inside a held transaction), which is the harness's doing, not the queue's.
"""

from __future__ import annotations

from leasecheck.stateful import properties as P
from leasecheck.stateful.contract import DONE
from leasecheck.stateful.verdict.findings import Finding, Saw, Unjudged, Violation
from leasecheck.stateful.verdict.view import Jobs


def judge(oracle: Jobs) -> list[Finding]:
    """Flag every job the queue showed done without an effect, from the `state()`
    answers no-lost-jobs read after the drain (no read of its own, so a history saved
    before this property existed is judged again from the answers it holds)."""
    found: list[Finding] = []
    for job_id, job in oracle.jobs.items():
        if oracle.shown.get(job_id) != DONE:
            continue
        found.append(Saw("job shown done judged against its effects"))
        if not job.completed_by:
            found.append(Saw("job shown done with no completion answered"))
        by = ", ".join(g.label for g in job.completed_by) or "no completion the queue answered"
        if not oracle.answers_complete:
            if oracle.effects.rows_seen.get(str(job_id), 0):
                continue
            found.append(
                Violation(
                    P.DONE_EFFECT,
                    f"the queue shows {job.label} done, but no effect of it ever committed",
                    (
                        f"accepted by: {by}; effect rows of {job.label}: none "
                        f"({len(job.grants)} claims seen)",
                    ),
                    (job.label,),
                    tuple(g.label for g in reversed(job.grants)),
                )
            )
            continue
        if job.effects_accepted:
            continue
        if job_id in oracle.effects.held_back:
            found.append(
                Unjudged(
                    f"{job.label} shows done with no effect accepted by the receiver, but "
                    "the machine held its effect back (its claim had not committed when the "
                    "body ran), so whether the queue lost it cannot be told"
                )
            )
            continue
        found.append(
            Violation(
                P.DONE_EFFECT,
                f"the queue shows {job.label} done, but the receiver accepted no effect of it",
                (f"accepted by: {by}; its keys: {sorted(job.effect_keys) or 'none'}",),
                (job.label,),
                tuple(g.label for g in reversed(job.grants)),
            )
        )
    return found
