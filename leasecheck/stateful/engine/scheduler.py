"""The call scheduler: one call at a time per session, run until it answers or blocks.

The driver decides what happens; this part sends each call on its worker's
session, notices a call blocked on a lock, lets at most one call wait at a time
(cancelling a second, as the harness's own doing), and hands every answer back in
the order the calls were sent. It judges nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import psycopg
from psycopg import Connection

from leasecheck.stateful.contract import Claim, ContractError, HarnessFault, as_claim
from leasecheck.stateful.engine import actors, sending
from leasecheck.stateful.engine.answers import (
    Answered,
    Done,
    Ended,
    Lost,
    Outcome,
    Raised,
    underlying,
)
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.history import History
from leasecheck.stateful.units import stamp

_CLAIMING = ("claim", "claim_many")


def plain(value: Any, *, claims: bool = False) -> Any:
    """Return `value` as something the history can hold and serialise.

    With `claims`, a claim of any type the contract allows (a `Claim`, an object with
    job_id, token and worker, a 3-tuple), or a list of them, is written as its parts.
    """
    if claims and isinstance(value, list):
        return [plain(v, claims=True) for v in value]
    if claims and value is not None:
        with contextlib.suppress(ContractError):
            claim = as_claim(value)
            return {
                "job_id": plain(claim.job_id),
                "token": repr(claim.token),
                "worker": claim.worker,
            }
    if isinstance(value, Claim):
        return plain(value, claims=True)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return repr(value)


class Host(Protocol):
    """What the scheduler asks of the core that holds it: the clock, the actors whose
    sessions it runs calls on, and where it reports what it saw."""

    now: int
    steps: int
    say: Callable[[str], None]
    """Tells the story of the example; a replay may swap it for its own."""

    def actors(self) -> list[Worker]: ...

    def end_txn(self, w: Worker, *, commit: bool, why: str = "") -> None: ...

    def job_label(self, claim: Claim) -> str: ...

    def saw(self, situation: str) -> None: ...

    def claim_in_flight(self, call: int) -> None:
        """A claim call was left in flight (paused between statements, or blocked)."""

    def claim_over(self, call: int, op: str, outcome: Outcome) -> None:
        """A claim call that was in flight answered with `outcome`."""

    def release_in_flight(self, op: str, releases: Sequence[Held], at: int) -> None:
        """A completion or failure report of `releases`, sent at `at`, was left in flight."""


class Scheduler:
    """Sends calls on the actors' sessions and hands each answer back; owns the gates."""

    def __init__(self, pool: actors.Pool, history: History, host: Host) -> None:
        self.pool = pool
        self.history = history
        self.host = host
        self.cancelled: set[int] = set()
        """ids of sessions whose running call the harness cancelled (the error is its doing)."""
        self.armed: dict[str, int] = {}
        """Actors whose next call is preempted after so many round trips, until one parks (a
        call that ends before its gate leaves the actor armed for the next)."""
        self.holds: dict[str, int] = {}
        """Armed actors whose paused call goes on by itself, and after how many steps."""
        self.pauses: dict[str, tuple[int, int]] = {}
        """Actors whose call is paused for a while: the step it paused in, and for how many."""
        self.claims_in_flight: set[int] = set()
        """Claim calls (by the history line that sent them) sent and not answered yet."""
        self.answering: int | None = None
        """The claim call in flight whose answer is being handled, if one is."""

    def sessions(self) -> list[actors.Session]:
        out = []
        for w in self.host.actors():
            out.append(w.main)
            if w.beat is not None:
                out.append(w.beat)
        return out

    def call(
        self,
        w: Worker,
        op: str,
        held: Held | None,
        fn: Callable[[Connection[Any]], Any],
        done: Done,
        *,
        beat: bool = False,
        after: int | None = None,
        releases: Sequence[Held] = (),
    ) -> None:
        """Send one call for one worker and handle its answer when it comes; with `after`,
        the call is preempted after that many round trips (see `stateful.engine.gates`).
        `releases`: the claims a completion or failure report gives back, which may be
        given back from the moment it is sent if it is left in flight."""
        session = w.beat if beat else w.main
        assert session is not None
        if after is None and not beat:
            after = self.armed.get(w.name)  # disarmed once a call parks (see `_after_send`)
        job = self.host.job_label(held.claim) if held else None
        token = repr(held.claim.token) if held else None
        self.history.add(self.host.now, w.name, op, "invoke", job=job, token=token)
        at = self.host.now
        call = self.history.events[-1].seq

        def finish(result: Any) -> None:
            if beat:
                w.beat_waiting = None
            else:
                w.waiting = None
            self.answering = call if call in self.claims_in_flight else None
            try:
                outcome = self._finish(w, op, held, at, result, done, beat=beat)
            finally:
                self.answering = None
            if call in self.claims_in_flight:
                self.claims_in_flight.discard(call)
                self.host.claim_over(call, op, outcome)

        if beat:
            w.beat_waiting = finish
        else:
            w.waiting = finish
        session.what = (op, job)
        sending.submit(self.pool, session, fn, self.sessions(), after=after)
        self.settle()
        self._after_send(w, session, beat=beat)
        if op in _CLAIMING and w.waiting is finish:  # paused or blocked: in flight
            self.claims_in_flight.add(call)
            self.host.claim_in_flight(call)
        if releases and w.waiting is finish and w.txn is None:
            self.host.release_in_flight(op, releases, at)

    def _after_send(self, w: Worker, session: actors.Session, *, beat: bool = False) -> None:
        """Tell what a call that has not answered is doing: parked at its gate, or blocked.

        PostgreSQL does not wake several waiters on one row in a fixed order (each
        re-checks the newest version and they race for it), so the harness lets only
        one call wait on a lock at a time: a second is cancelled. That also ends a
        deadlock (the second waits on the first) as PostgreSQL would: it aborts the
        newest waiter. A parked call waits on no lock: it is not a waiter.
        """
        if (w.beat_waiting if beat else w.waiting) is None:
            return
        op, job = session.what
        what = f"{op} of {job}" if job else op
        if session.parked:
            assert session.gate is not None
            self.armed.pop(w.name, None)
            if w.name in self.holds:  # goes on by itself after so many further steps
                self.pauses[w.name] = (self.host.steps, self.holds.pop(w.name))
            statement = self.pool.last_statement(session)
            said = f"paused after statement {session.gate.after}"
            self.history.add(
                self.host.now, w.name, op, "event", job=job, value=statement, note=said
            )
            self.host.saw("call paused between its statements")
            self.host.say(f"  {w.name}'s {what} {said}: {statement}")
            return
        others = [s for s in self.sessions() if s is not session]
        if any(s.pending is not None and not s.parked for s in others):
            why = "cancelled by the harness: another call already waits on a lock"
            self.history.add(
                self.host.now, w.name, op, "event", job=job, value="cancelled", note=why
            )
            self.host.say(f"  {w.name}'s {what} would wait behind another waiter: cancelled")
            self.cancelled.add(id(session))
            self.pool.cancel(session)
            self.settle()
            return
        note = "blocked on a lock"
        self.history.add(self.host.now, w.name, op, "event", job=job, value="blocked", note=note)
        self.host.saw("call blocked on a lock")
        self.host.say(f"  {w.name}'s {what} is blocked on a lock")

    def resume_call(self, w: Worker) -> None:
        """Let `w`'s parked call go on from its gate; it may answer, or block on a lock."""
        sending.resume(w.main)
        op, job = w.main.what
        self.history.add(self.host.now, w.name, op, "event", job=job, note="goes on")
        self.host.say(f"t={stamp(self.host.now)} {w.name}'s {op} goes on")
        self.settle()
        self._after_send(w, w.main)

    def _finish(
        self,
        w: Worker,
        op: str,
        held: Held | None,
        at: int,
        result: Any,
        done: Done,
        *,
        beat: bool,
    ) -> Outcome:
        """Record what a call sent at `at` ended in, hand that outcome to `done`, return it."""
        job = self.host.job_label(held.claim) if held else None
        token = repr(held.claim.token) if held else None
        session = w.beat if beat else w.main
        assert session is not None
        outcome = self._outcome(session, result)
        if isinstance(outcome, Ended):
            self._harness_cancelled(w, op, job, beat=beat)
        elif isinstance(outcome, Lost):
            self.history.add(
                self.host.now, w.name, op, "info", job=job, token=token, note=outcome.note
            )
        elif isinstance(outcome, Raised):
            self.history.add(
                self.host.now, w.name, op, "fail", job=job, token=token, note=outcome.quote
            )
            in_error = w.main.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
            if not beat and w.txn is not None and in_error:
                w.main.conn.execute("rollback")  # the worker gives up its failed transaction
                self.host.end_txn(w, commit=False, why="the transaction failed")
        else:
            value = plain(result, claims=op in _CLAIMING)
            self.history.add(self.host.now, w.name, op, "ok", job=job, token=token, value=value)
        done(outcome, at)
        return outcome

    def _outcome(self, session: actors.Session, result: Any) -> Outcome:
        """Return what the call ended in: only a live connection's answer is the queue's.

        A call the harness cancelled, or whose backend it terminated (a crash, a cut),
        is never the queue's answer, whatever the library made of it: one that logs and
        swallows the error and returns normally has not answered either. Nor is a
        `HarnessFault` (what carried the call failed): it stops the run, no verdict.
        """
        fault = underlying(result, HarnessFault) if isinstance(result, BaseException) else None
        if fault is not None:
            raise fault  # what carried the call failed: nothing after it is the queue's
        if id(session) in self.cancelled:
            self.cancelled.discard(id(session))
            return Ended("cancelled by the harness")
        if session.terminated:
            if isinstance(result, BaseException):
                return Lost(result)
            return Lost(None, returned=result)
        if not isinstance(result, BaseException):
            return Answered(result)
        if session.broken:
            return Lost(result)
        return Raised(result)

    def _harness_cancelled(self, w: Worker, op: str, job: str | None, *, beat: bool) -> None:
        """Record a call the harness cancelled as the harness's doing, never the queue's.

        The cancel aborts the transaction the worker holds open, if the call ran in
        one; the harness ends that transaction at once, so no later call of the
        worker runs into an aborted transaction and reads as a refusal.
        """
        note = "cancelled by the harness"
        self.history.add(self.host.now, w.name, op, "event", job=job, value="cancelled", note=note)
        in_error = w.main.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        if not beat and w.txn is not None and in_error:
            w.main.conn.execute("rollback")
            self.host.end_txn(
                w, commit=False, why="ended by the harness: it cancelled a call in it"
            )

    def settle(self) -> None:
        """Let released calls run until each has finished or is blocked again, and hand
        each finished call's outcome on, until none is left. Handing one on may end a
        transaction (the rollback after a cancelled or failed call in it), which
        releases the calls blocked behind it: they are waited for too, before anything
        else is sent, or the next call would race them."""
        while self._settle_once():
            pass

    def _settle_once(self) -> bool:
        """Settle the calls in flight and hand on the outcomes of those that finished;
        return whether any had."""
        sessions = self.sessions()
        sending.settle(self.pool, sessions)
        finished = []
        for w in self.host.actors():
            for session, attr in ((w.main, "waiting"), (w.beat, "beat_waiting")):
                callback = getattr(w, attr)
                if session is None or callback is None or session.pending is None:
                    continue
                if session.pending.done():
                    finished.append((session.invoked, session, callback))
        # Calls released together are judged in the order they were sent: PostgreSQL
        # queues lock waiters first come, first served.
        for _, session, callback in sorted(finished, key=lambda f: f[0]):
            try:
                result = sending.outcome(session)
            except Exception as exc:
                result = exc
            except actors.CallHung as exc:  # a dead client's call, ended by the harness
                if not session.terminated:
                    raise
                result = exc
            callback(result)
        return bool(finished)
