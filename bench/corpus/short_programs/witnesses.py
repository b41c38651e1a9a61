"""One short program per planted bug: it breaks the named property on the buggy queue
and replays whole, breaking nothing, on its clean queue.

Each is a list of the machine's own rule calls (`leasecheck.stateful.program.Step`),
replayed as a saved failure is (`leasecheck.stateful.story.replay`); worker picks index
the workers eligible for the move at that step (`stateful.engine.driver`), so
`Take(worker=1)` is the second worker that may claim then. Each program is at most a
dozen moves on two workers and one or two jobs: small scope, yet `ci` met none of them.
"""

from __future__ import annotations

from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step


def _s(rule: str, **args: object) -> Step:
    return Step(rule, dict(args))


START = _s("start", workers=2)
W0 = Take(worker=0, held=False)
"""The first worker that may claim, committing at once."""
SECOND_JOB = _s("enqueue", jobs=1)

RETRY_AT_CAP = [
    START,
    _s("claim", how=W0),
    _s("fail", pick=0),  # try 1 of 2 fails: ready again a second later
    _s("time_passes", to="second"),
    _s("claim", how=W0),
    _s("fail", pick=0),  # the last try fails: ready again, but no claim takes it
]
"""One worker fails the task on both its tries; the drain finds it ready and untakeable."""

DONE_THEN_EFFECT = [
    START,
    _s("claim", how=W0),
    _s("preempt", pick=0, after=1),  # w0's next call pauses after its first statement
    _s("complete", pick=0),  # `finished` committed; the effect's transaction not begun
    _s("crash", pick=0),
]
"""The completion commits `finished`, pauses before the effect's transaction, and dies."""

COUNT_AFTER_COMMIT = [
    START,
    SECOND_JOB,
    _s("claim", how=Take(worker=1, held=True)),  # w1 takes job1 in an open transaction
    _s("time_out", pick=0),  # w0's next call that waits on a lock times out
    _s("claim", how=W0),  # w0 takes job2 and commits; its count waits on w1's: 55P03
]
"""w1's open claim holds the counter row; w0's claim commits job2, then its counter update
times out and the call raises: job2 is taken by nobody."""

HEARTBEAT_REVIVES = [
    START,
    _s("claim", how=W0),
    _s("preempt", pick=0, after=2),
    _s("complete", pick=0),  # BEGIN, UPDATE ... finished: paused holding the row
    _s("time_passes", to="beat"),  # w0's heartbeat thread beats: blocked on the row
    _s("resume_call", pick=0),  # the completion commits; the beat lands after it
]
"""w0's heartbeat waits out w0's own completion, then marks the finished task active."""

BATCH_ANY_ANY = [
    START,
    SECOND_JOB,
    _s("claim_batch", pick=0, size=2),  # w0 takes job1#1 and job2#1
    # w0 sleeps past its leases; w1 takes job1#2; w0 wakes, takes job2#2 and acknowledges
    # all it holds in one batch, newest first: (job2, 2), (job2, 1), (job1, 1)
    _s("asleep", how=Stall(worker=0, alone=False, then="batch")),
]
"""The stale job1#1 rides in a batch with the fresh job2#2: job1's current try (2) is in
the list of tries, so the batch finishes job1 under w1; w1's completion is refused."""

EXTEND_FROM_LEASE_END = [
    START,
    _s("claim", how=W0),
    # w0 sleeps alone a lease and a microsecond past its lease end, then beats: old end +
    # a lease is still past, and the heartbeat answers True anyway
    _s("asleep", how=Stall(worker=0, alone=True, then="heartbeat", long=True)),
    _s("claim", how=Take(worker=1, held=False)),  # w1 takes the task the queue shows expired
]
"""w0 sleeps more than a lease past its lease end; its heartbeat moves the lease to a
moment already past and answers True; w1 then takes the task inside the lease w0 was
promised. A program of the opening's third small scope."""

UNLOCKED_LEASE_ROW = [
    START,
    _s("claim", how=W0),
    _s("preempt", pick=1, after=3),  # w1's next call pauses after its third statement
    # w0 sleeps past its lease; w1 claims job1: it picks the item (reading w0's lease as
    # expired) and takes it, then pauses before its grant; w0 wakes and renews, unhindered
    _s("asleep", how=Stall(worker=0, alone=False, then="heartbeat")),
    # the run's end lets w1's claim go on: its grant overwrites w0's renewed lease
]
"""w1's claim reads w0's lease as expired and locks only the item; w0's renewal, on the
unlocked lease row, commits in between; the grant then overwrites it. A program of the
opening's third small scope."""

WITNESSES: dict[str, tuple[tuple[str, ...], list[Step]]] = {
    "task-table-retry-at-cap": (("no-lost-jobs",), RETRY_AT_CAP),
    "task-table-done-then-effect": (("done-effect",), DONE_THEN_EFFECT),
    "work-leases-count-after-commit": (("no-hidden-claims",), COUNT_AFTER_COMMIT),
    "task-table-heartbeat-revives": (("fencing",), HEARTBEAT_REVIVES),
    "task-table-batch-any-any": (("owner-progress",), BATCH_ANY_ANY),
    "task-table-extend-from-lease-end": (("exclusive-lease",), EXTEND_FROM_LEASE_END),
    "work-leases-unlocked-lease-row": (("exclusive-lease",), UNLOCKED_LEASE_ROW),
}
"""Bug (its `VARIANTS` name) -> (the property its witness breaks, the witness)."""
