"""Calls on the harness's sessions: where each runs, and waiting until each is settled.

A call runs on its session's own thread while the machine waits until the call
returns or its backend waits on a lock that another session holds. A blocked call
stays pending; a later commit, rollback or termination releases it, and `settle()`
waits until every pending call has finished or is blocked again, so each step ends in
a state that depends on the program alone, never on timing. A wait that is neither
progress nor a lock wait ends in `Stuck`, naming the statements involved, after a
safety timeout (the pool's `deadline`). A call that nothing could block (no other call
in flight, no transaction held open) runs on the machine's own thread instead: the
hand-off would cost as much as the call's round trip and change nothing.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any

from psycopg import Connection

from leasecheck.stateful.engine.actors import FIRST_LOOK, Pool, Session, Stuck
from leasecheck.stateful.engine.gates import Gate, GatedConnection, WireGate

_INVOCATIONS = itertools.count(1)


def submit(
    pool: Pool,
    session: Session,
    call: Callable[[Connection[Any]], Any],
    sessions: list[Session],
    after: int | None = None,
) -> Future[Any]:
    """Start `call(conn)`: on the session's thread if anything among `sessions` could
    block it, else to completion on this one (see `could_block`). With `after`, the
    call is parked before its round trip number `after + 1` (see `stateful.engine.gates`), so
    it runs on its own thread whatever could block it."""
    assert session.pending is None, f"{session.label} already has a call in flight"
    pool.ready(session)
    session.invoked = next(_INVOCATIONS)
    session.used = True
    session.gate = None
    if after is not None and session.endpoint is not None:
        endpoint = session.endpoint
        session.gate = WireGate(endpoint, after)

        def held_on_the_wire(c: Connection[Any]) -> Any:
            try:
                return call(c)
            finally:
                endpoint.stepped = False  # a call that ended before its gate leaves none

        future = session.executor.submit(_tracked, session, held_on_the_wire)
    elif after is not None:
        gate = session.gate = Gate(after)
        conn = session.conn
        assert isinstance(conn, GatedConnection), "harness sessions are opened gated"

        def gated(c: Connection[Any]) -> Any:
            conn.gate = gate
            try:
                return call(c)
            finally:
                conn.gate = None

        future = session.executor.submit(_tracked, session, gated)
    elif could_block(session, sessions):
        future = session.executor.submit(_tracked, session, call)
    else:
        future = pool.run_inline(session, call)
    session.pending = future
    return future


def _tracked(session: Session, call: Callable[[Connection[Any]], Any]) -> Any:
    """Run `call` on the session's thread, noting the thread (what `CallHung` ends)."""
    session.thread = threading.get_ident()
    return call(session.target)


def resume(session: Session) -> None:
    """Open the gate of the session's parked call; `settle` then waits for what it does."""
    assert session.gate is not None and session.parked, f"{session.label} has no parked call"
    session.gate.open()


def could_block(session: Session, sessions: list[Session]) -> bool:
    """Return whether a call on `session` could wait on something only a later step ends.

    Only a transaction held open between steps or another call in flight can hold
    a lock that long: a finished autocommit call holds none, and `settle` would wait
    out anything else (deadlock_timeout is an hour, so PostgreSQL breaks no cycle).
    """
    others = [s for s in sessions if s is not session]
    running = any(s.pending is not None and not s.pending.done() for s in others)
    return running or bool(_holders(others))


def settle(pool: Pool, sessions: list[Session]) -> None:
    """Wait until every pending call among `sessions` has finished or is stuck for good.

    A call counts as blocked only while it waits, directly or through other blocked
    calls, on a transaction one of `sessions` holds open between steps: only a later
    step can release it. A wait on anything else (autovacuum truncating a table, a
    backend still committing) passes by itself, so it is waited out; treating it as
    blocked would make the step's outcome depend on timing.

    Calls that wait on each other in a cycle are stuck for good too: a deadlock,
    which PostgreSQL breaks by aborting the waiter that checks last, the newest
    (the harness sets deadlock_timeout to an hour so the check never runs by
    itself). The caller breaks it the same way: it cancels the newest call.
    """
    waiting = [s for s in sessions if _running(s)]
    delay = FIRST_LOOK
    spent = 0.0
    while waiting:
        futures = [s.pending for s in waiting if s.pending is not None]
        wait_futures(futures, timeout=delay)
        spent += delay
        running = [s for s in waiting if _running(s)]
        if not running:
            return
        # One call with no transaction held open has nothing to be held still by
        # (deadlock_timeout is an hour, so only a cycle of calls could): skip the look.
        # A call with a lock timeout set is never held still: its wait on a transaction
        # held between steps surely outlasts the timeout, so PostgreSQL ends it.
        timing = any(s.times_out for s in running)
        if (len(running) > 1 or _holders(sessions)) and not timing:
            waits_for = pool.blocked(running)
            if _held_still(waits_for, sessions, running):
                return
        if spent > pool.deadline:
            described = pool.describe(running)
            pool.cut_short(running)
            raise Stuck(
                f"calls neither finished nor waited on a held transaction within "
                f"{pool.deadline:g} s (their statements were cancelled): " + described
            )
        waiting = running
        delay = min(delay * 2, 0.05)


def _held_still(
    waits_for: dict[int, list[int]], sessions: list[Session], running: list[Session]
) -> bool:
    """Return whether every running call waits only on transactions held between steps."""
    holders = _holders(sessions)
    # What each running call waits for: the blockers of whichever of its backends waits
    # (a queue's own client may have several; a call runs on one of them at a time).
    waits = {
        i: {b for p in s.pids & waits_for.keys() for b in waits_for[p]}
        for i, s in enumerate(running)
    }
    stuck = {i for i, blockers in waits.items() if blockers}
    if len(stuck) < len(running):
        return False
    changed = True
    while changed:  # drop calls that wait on anything but holders or other stuck calls
        changed = False
        stuck_pids = {p for i in stuck for p in running[i].pids}
        for i in list(stuck):
            if not all(b in holders or b in stuck_pids for b in waits[i]):
                stuck.discard(i)
                changed = True
    return len(stuck) == len(running)


def _running(session: Session) -> bool:
    """Return whether the session's call is on its way: neither finished nor parked.

    A call at its gate is settled for now: only a later step opens the gate.
    """
    pending = session.pending
    return pending is not None and not pending.done() and not session.parked


def blocked(session: Session) -> bool:
    """Return whether the session's call waits on a lock, as one left running when a
    step ended does (`settle` ends a step only when every running call is blocked)."""
    return _running(session)


def _holders(sessions: list[Session]) -> set[int]:
    """Return the pids of sessions idle inside a transaction: held open between steps
    (by the harness, or by a call parked between its statements)."""
    return {
        pid
        for s in sessions
        if not s.terminated
        and (s.pending is None or s.pending.done() or s.parked)
        and s.in_transaction
        for pid in s.pids
    }


def outcome(session: Session) -> Any:
    """Return the finished call's result (or raise its error) and clear it."""
    future = session.pending
    assert future is not None and future.done()
    session.pending = None
    return future.result()
