"""Does the queue follow simulated time? Asked once, before any example is explored.

A queue that reads the wall clock never sees a lease run out in simulated time, and
the machine would then report its symptoms (a job never handed out again, a lease
that seems to outlive its heartbeat) as violations. The probe asks the question
about the clock itself: it counts the reads of simulated time that a claim and a
heartbeat make, and names the call that made none. A queue that reads the clock but
never hands an expired job out again is not the probe's business: that is a
no-lost-jobs verdict, with its story, for the machine to give.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.stateful import clock
from leasecheck.stateful.contract import Queue, capabilities

LEASE = timedelta(seconds=30)
TICK = timedelta(microseconds=1)

CAUSES = (
    "likely causes: CURRENT_TIMESTAMP or LOCALTIMESTAMP in its SQL (they bypass the "
    "search path that simulated time uses; write now()), functions declared with a pinned "
    "search_path (SET search_path = pg_catalog, ...), or timestamps taken in the client; "
    "a queue with a clock of its own can supply advance_clock(conn, delta)"
)


def clock_problem(queue: Queue, conn: Connection[Any]) -> str | None:
    """Return why `queue` does not follow simulated time, or None if it does.

    One job is enqueued and claimed with a 30 s lease, then heartbeated (when the
    queue's heartbeat answers): each call must read simulated time at least once, as
    a lease end cannot be written otherwise. A queue with `advance_clock` keeps a
    clock of its own and is not asked. `conn` must be on simulated time
    (`clock.connect`), in a database the suite created with the harness schema and
    the queue installed; the probe leaves both reset.
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
            if claim is None:
                return (
                    f"leasecheck: {queue.name} handed out nothing for a job just enqueued: if "
                    f"it schedules jobs by the wall clock, it does not follow simulated time; "
                    f"{CAUSES}"
                )
            if caps.advance_clock is not None:
                return None
            if reads() == before:
                return _blind(queue, "claim()")
            if caps.heartbeats and caps.heartbeat_answers:
                before = reads()
                try:
                    queue.heartbeat(conn, claim, LEASE)
                except Exception:
                    return None  # as for the claim: an answer to judge
                if reads() == before:
                    return _blind(queue, "heartbeat()")
        return None
    finally:
        queue.reset(conn)
        clock.reset(conn)


def _blind(queue: Queue, call: str) -> str:
    return (
        f"leasecheck: {queue.name} does not follow simulated time: its {call} never read "
        f"now() (or its siblings), so the lease it writes is on another clock; {CAUSES}"
    )
