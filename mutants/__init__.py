"""Known-buggy queues: the reference queue with one thing wrong each.

Every module's docstring names the bug, where it comes from and the property that
must catch it; `expected` lists that property and its honest neighbours (a race
can surface on either). `ALL` is the corpus the kill tests and the kill matrix run.
"""

from __future__ import annotations

ALL = {
    "naive": "mutants.naive:Naive",
    "heartbeat-only": "mutants.heartbeat_only:HeartbeatOnly",
    "effect-outside": "mutants.effect_outside:EffectOutside",
    "attempt-key": "mutants.attempt_key:AttemptKey",
    "no-row-lock": "mutants.no_row_lock:NoRowLock",
    "clock-fence": "mutants.clock_fence:ClockFence",
    "strict-lease": "mutants.strict_lease:StrictLease",
    "no-retry-cap": "mutants.no_retry_cap:NoRetryCap",
    "unfenced-heartbeat": "mutants.unfenced_heartbeat:UnfencedHeartbeat",
    "unfenced-fail": "mutants.unfenced_fail:UnfencedFail",
    "fail-gives-up": "mutants.fail_gives_up:FailGivesUp",
    "reaper-by-id": "mutants.reaper_by_id:ReaperById",
    "lifeline-by-age": "mutants.lifeline_by_age:LifelineByAge",
    "limbo-at-cap": "mutants.limbo_at_cap:LimboAtCap",
    "stale-release": "mutants.stale_release:StaleRelease",
    "batch-first-fence": "mutants.batch_first_fence:BatchFirstFence",
    "batch-by-worker": "mutants.batch_by_worker:BatchByWorker",
    "no-recovery": "mutants.no_recovery:NoRecovery",
    "check-then-act": "mutants.check_then_act:CheckThenAct",
    "sweep-undoes": "mutants.sweep_undoes:SweepUndoes",
    "heartbeat-revives": "mutants.heartbeat_revives:HeartbeatRevives",
    "early-reclaim": "mutants.early_reclaim:EarlyReclaim",
    "ack-then-work": "mutants.ack_then_work:AckThenWork",
    "minute-key": "mutants.minute_key:MinuteKey",
    "claims-two": "mutants.claims_two:ClaimsTwo",
    "in-subquery-claim": "mutants.in_subquery_claim:InSubqueryClaim",
    "from-subquery-claim": "mutants.from_subquery_claim:FromSubqueryClaim",
    "recover-by-name": "mutants.recover_by_name:RecoverByName",
    "swallowed-timeout": "mutants.swallowed_timeout:SwallowedTimeout",
    "swallowed-conflict": "mutants.swallowed_conflict:SwallowedConflict",
}

FAILURE_CAPPED = {
    "failure-cap-late": "mutants.failure_cap_late:FailureCapLate",
    "failure-cap-counts-claims": "mutants.failure_cap_counts_claims:FailureCapCountsClaims",
}
"""Mutants of a queue whose cap counts failure reports (`mutants._failure_capped`): it
has a schema of its own, so they run on a database of their own
(tests/test_failure_cap.py), not beside `ALL` on the reference's."""
