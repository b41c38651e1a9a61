"""Does the queue follow simulated time? Asked once, before any example is explored.

A queue that reads the wall clock never sees a lease run out in simulated time, and
the machine would then report its symptoms (a job never handed out again, a lost
job) as violations. The probe turns that into one line that names the likely causes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from psycopg import Connection

from leasecheck.stateful import clock
from leasecheck.stateful.contract import FAILED, QUEUED, Queue, capabilities

LEASE = timedelta(seconds=30)
WAIT = 3 * LEASE

CAUSES = (
    "likely causes: CURRENT_TIMESTAMP or LOCALTIMESTAMP in its SQL (they bypass the "
    "search path that simulated time uses; write now()), functions declared with a pinned "
    "search_path (SET search_path = pg_catalog, ...), or timestamps taken in the client; "
    "a queue with a clock of its own can supply advance_clock(conn, delta)"
)


def clock_problem(queue: Queue, conn: Connection[Any]) -> str | None:
    """Return why `queue` does not follow simulated time, or None if it does.

    One job is claimed with a 30 s lease; 90 s later (after the queue's recovery
    sweep, if it has one) the queue must show the job recovered, or hand it out to
    another worker. `conn` must be on simulated time (`clock.connect`), in a database
    with the harness schema and the queue installed; the probe leaves both reset.
    """
    caps = capabilities(queue)
    queue.reset(conn)
    clock.reset(conn)
    try:
        job = queue.enqueue(conn, {"n": 0, "kind": "clock-probe"})
        if queue.claim(conn, "probe-1", LEASE) is None:
            return (
                f"leasecheck: {queue.name} handed out nothing for a job just enqueued: if it "
                f"schedules jobs by the wall clock, it does not follow simulated time; {CAUSES}"
            )
        clock.advance(conn, WAIT)
        if caps.advance_clock is not None:
            caps.advance_clock(conn, WAIT)
        if caps.maintain is not None:
            caps.maintain(conn)
        if caps.state is not None and caps.state(conn, job) in (QUEUED, FAILED):
            return None
        if caps.state is None and queue.max_attempts == 1:
            return None  # the job may rightly be given up at its cap: nothing to tell by
        if queue.claim(conn, "probe-2", LEASE) is not None:
            return None
        if caps.state is not None and caps.state(conn, job) == FAILED:
            return None
        return (
            f"leasecheck: {queue.name} does not follow simulated time: a job claimed with a "
            f"30 s lease was not handed out again {WAIT.seconds} s later (nor shown recovered); "
            f"{CAUSES}; a queue that never recovers an expired lease stops here too"
        )
    finally:
        queue.reset(conn)
        clock.reset(conn)
