"""Does the queue follow simulated time? Asked once, before any example is explored.

A queue that reads the wall clock never sees a lease run out in simulated time, and
the machine would then report its symptoms (a job never handed out again, a lease
that seems to outlive its heartbeat) as violations. The probe asks about behaviour
first: a queue follows simulated time if moving the clock changes what it does. A
claim or heartbeat that reads simulated time is on it; one that reads none is asked
to show it: a lease a claim wrote must be taken over once the clock passes its end,
and a heartbeat must not end a lease it still had (`lease_until + lease`, computed
from the stored end, is on simulated time and passes, to be judged like any other).
A queue that reads the clock but never hands an expired job out again is not the
probe's business: that is a no-lost-jobs verdict, with its story, for the machine.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.stateful import clock
from leasecheck.stateful.contract import Queue, capabilities

LEASE = timedelta(seconds=30)
TICK = timedelta(microseconds=1)
BEFORE_BEAT = timedelta(seconds=20)
"""When the probe heartbeats: inside the lease the claim wrote."""

CAUSES = (
    "likely causes: CURRENT_TIMESTAMP or LOCALTIMESTAMP in its SQL (they bypass the "
    "search path that simulated time uses; write now()), functions declared with a pinned "
    "search_path (SET search_path = pg_catalog, ...), or timestamps taken in the client; "
    "a queue with a clock of its own can supply advance_clock(conn, delta)"
)


def clock_problem(queue: Queue, conn: Connection[Any]) -> str | None:
    """Return why `queue` does not follow simulated time, or None if it does.

    One job is enqueued and claimed with a 30 s lease, then heartbeated 20 s later
    (when the queue's heartbeat answers). A call that read simulated time passes; one
    that read none passes only by behaviour (see the module). A queue with
    `advance_clock` keeps a clock of its own and is not asked. `conn` must be on
    simulated time (`clock.connect`), in a database the suite created with the harness
    schema and the queue installed; the probe leaves both reset.
    """
    caps = capabilities(queue)
    queue.reset(conn)
    clock.reset(conn)
    try:
        queue.enqueue(conn, {"n": 0, "kind": "clock-probe"})
        clock.advance(conn, TICK)  # as the machine does: no claim shares its enqueue's instant
        with clock.counting_reads(conn) as reads:
            before = reads()
            try:
                claim = queue.claim(conn, "probe-1", LEASE)
            except Exception:
                return None  # the queue's answer, for the machine to judge: no clock question
            claim_read = reads() > before
        if claim is None:
            return (
                f"leasecheck: {queue.name} handed out nothing for a job just enqueued: if "
                f"it schedules jobs by the wall clock, it does not follow simulated time; "
                f"{CAUSES}"
            )
        if caps.advance_clock is not None:
            return None
        if not claim_read:
            return None if _lease_runs_out(queue, conn) else _blind(queue, "claim()")
        if caps.heartbeats and caps.heartbeat_answers:
            clock.advance(conn, BEFORE_BEAT)
            with clock.counting_reads(conn) as reads:
                before = reads()
                try:
                    queue.heartbeat(conn, claim, LEASE)
                except Exception:
                    return None  # as for the claim: an answer to judge
                beat_read = reads() > before
            if not beat_read and _taken_over(queue, conn):
                return _blind(queue, "heartbeat()", ended=True)
        return None
    finally:
        queue.reset(conn)
        clock.reset(conn)


def _taken_over(queue: Queue, conn: Connection[Any]) -> bool:
    """Return whether another worker is handed the probe's job now (after the queue's
    own recovery sweep, if it has one)."""
    maintain = capabilities(queue).maintain
    try:
        if maintain is not None:
            maintain(conn)
        return queue.claim(conn, "probe-2", LEASE) is not None
    except Exception:
        return False  # an answer for the machine to judge, not a clock question


def _lease_runs_out(queue: Queue, conn: Connection[Any]) -> bool:
    """Return whether the lease the claim wrote holds now and runs out on simulated time:
    not taken over at once, taken over once the clock has passed its end."""
    if _taken_over(queue, conn):
        return False
    clock.advance(conn, LEASE + TICK)
    return _taken_over(queue, conn)


def _blind(queue: Queue, call: str, *, ended: bool = False) -> str:
    what = (
        "and the job it still held was handed out again right after it: the lease end it "
        "wrote lies before the instant it was sent"
        if ended
        else "and the job was not handed out again once the clock passed the end of its lease"
    )
    return (
        f"leasecheck: {queue.name} does not follow simulated time: its {call} never read "
        f"now() (or its siblings) {what}, so the lease it writes is on another clock; {CAUSES}"
    )
