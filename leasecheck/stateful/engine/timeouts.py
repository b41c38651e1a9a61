"""The lock-timeout fault: calls sent with `lock_timeout` armed, and the refusals it gives.

A worker armed by the `time_out` move sends its calls with the real setting on its
session until one of them waits on a lock, which PostgreSQL then ends with
lock_not_available (55P03): the queue's answer. Which transaction held the lock is
not known, so such a refusal is judged only once whatever may have held it has
committed (`LockTimeouts.judge`). Every call also goes through here on its way to the
scheduler, so a serialization failure (40001) the queue answered with is counted.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.stateful.engine import answers
from leasecheck.stateful.engine.answers import Done, Outcome, Raised
from leasecheck.stateful.engine.core import Core, seconds
from leasecheck.stateful.engine.gates import Gate, GatedConnection
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.sqlfile import load

FAULTS = load(Path(__file__).with_name("faults.sql"))

_INERROR = psycopg.pq.TransactionStatus.INERROR

Rival = tuple[Worker, list[Callable[[], None]], list[bool]]
"""Another worker's transaction open while a call timed out: the worker, its updates
list (the transaction it was), and whether that transaction committed."""


class LockTimeouts:
    """Who runs with a lock timeout armed, and the timed-out refusals waiting on a verdict."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.armed: set[str] = set()
        """Workers whose calls run with a lock timeout set, until one of them times out."""
        self.timed_out: dict[Held, tuple[str | None, list[Rival]]] = {}
        """Claims whose call a lock timeout ended: why it is not judged at all (a
        lock it may have waited on that says nothing of its own job), and each other
        worker's open transaction (its updates list, and whether it committed)."""
        self.holders: dict[Held, str] = {}
        """The same claims: the open transactions that may have held the lock, in words,
        as they stood when the call timed out (what its refusal's story names)."""

    def arm(self, name: str) -> None:
        self.armed.add(name)
        self.core.history.add(self.core.now, name, "time_out", "event", note="lock_timeout armed")
        said = "its next call that waits on a lock times out"
        self.core.say(f"t={seconds(self.core.now)} {name}: {said}")

    def armable(self) -> list[str]:
        return [w.name for w in self.core.workers if w.can_act and w.name not in self.armed]

    def clear(self) -> None:
        """Nothing the teardown sends times out."""
        self.armed.clear()

    def send(
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
        """Send a call; for a worker armed by `time_out`, with the lock timeout set on its
        session just before and reset once it answered (a rollback undoes it too)."""
        kw: dict[str, Any] = {"beat": beat, "after": after, "releases": releases}
        call = self.core.scheduler.call
        if beat or w.name not in self.armed:
            call(w, op, held, fn, self._noting(done), **kw)
            return
        session = w.main
        session.conn.execute(FAULTS["arm_lock_timeout"].text)
        session.times_out = True
        since = len(self.core.ended)  # transactions that end from now on were open in its flight
        trips = _Trips()

        def timed(outcome: Outcome, at: int) -> None:
            session.times_out = False
            if not session.broken and session.conn.info.transaction_status != _INERROR:
                session.conn.execute(FAULTS["disarm_lock_timeout"].text)
            error = outcome.error if isinstance(outcome, Raised) else None
            if answers.underlying(error, psycopg.errors.LockNotAvailable) is not None:
                self.armed.discard(w.name)
                self.core.saw("call timed out on a lock")
                if trips.timed_out_at > 1:
                    self.core.saw("lock timeout on a call's later statement")
                # a batch completion's claims are its releases, not its `held`
                batch = [held] if held is not None else list(releases)
                for h in batch:
                    self._rivals_of(w, h, [o for o in batch if o is not h], since)
            done(outcome, at)

        call(w, op, held, trips.counting(fn), self._noting(timed), **kw)

    def _noting(self, done: Done) -> Done:
        """Count a serialization failure (40001) the queue answered with, then read it."""

        def noted(outcome: Outcome, at: int) -> None:
            error = outcome.error if isinstance(outcome, Raised) else None
            if answers.underlying(error, psycopg.errors.SerializationFailure) is not None:
                self.core.saw("serialization failure in a held transaction")
            done(outcome, at)

        return noted

    def _rivals_of(self, w: Worker, held: Held, batch: Sequence[Held] = (), since: int = 0) -> None:
        """Note what a timed-out call may have waited for: the other workers' open
        transactions (each marked so its commit is known), one that rolled back while
        the call was in flight (`core.ended[since:]`: a crash may end it before the
        answer is read), or a call in flight; for one claim of a batch, also the rows of
        its batch's other jobs, which any open transaction may have locked (a claim of
        it, or one no claim shows, as a claim that gave an expired job up at its cap):
        then the wait says nothing of this claim's job."""
        core = self.core
        why = None
        if any(o is not w and o.waiting is not None and not o.crashed for o in core.actors()):
            why = "while another call was in flight, which may have held it"
        rolled = [name for name, ok in core.ended[since:] if not ok and name != w.name]
        if rolled and why is None:
            why = f"while {rolled[0]}'s transaction was open, which then rolled back"
        rivals: list[Rival] = []
        others = {o.claim.job_id for o in batch} - {held.claim.job_id}
        for other in core.workers:
            if other is not w and other.txn is not None:
                committed: list[bool] = []
                other.txn.append(partial(committed.append, True))
                rivals.append((other, other.txn, committed))
                locked = [core.job_label(o.claim) for o in other.held if o.claim.job_id in others]
                if locked and why is None:
                    why = (
                        f"with {locked[0]} in its batch, which {other.name}'s open "
                        "transaction holds: the wait may have been on that job's row"
                    )
                elif others and why is None and not _holds(other, held):
                    # Holding no claim of this job, its transaction may still hold a row
                    # of the batch no claim shows (a claim that gave an expired job up
                    # at its cap locks it).
                    others_label = core.job_label(next(o.claim for o in batch if o is not held))
                    why = (
                        f"with {others_label} in its batch while {other.name}'s transaction "
                        "was open, which may hold that job's row: the wait may have been on it"
                    )
        if why is not None or rivals:
            self.timed_out[held] = (why, rivals)
            self.holders[held] = _held_by([o for o, _, _ in rivals])

    def judge(
        self,
        h: Held,
        op: str,
        read: answers.YesNo,
        at: int,
        answered: int,
        lease_from: int | None = None,
    ) -> None:
        """Judge an answer; a refusal a lock timeout gave waits for what held the lock.

        Which transaction held it is not known (the wait is over before anyone could
        look), and one that had not committed may have claimed the job or given it up:
        in effect a claim in flight. So the refusal is judged once every other
        worker's transaction open then has committed (the queue as those commits left
        it), and is said, not judged, when one rolled back or another call was in
        flight (it may have held the lock, and nobody knows what it did), or, for one
        claim of a batch, when another worker's open transaction held another job of the
        batch, or no claim of this one (it may have held the row of another job of the
        batch all the same: the wait, and so the refusal, may be that job's)."""
        waited = self.timed_out.pop(h, None)
        holders = self.holders.pop(h, "")
        if waited is None or read.raised is None:
            _answer(self.core, h, op, read, at, answered, lease_from)
            return
        why, rivals = waited
        if why is not None:
            self.core.say(f"  not judged: the {op} of {h.label} timed out on a lock {why}")
            return
        # Its refusal, if judged, says what refused it: the harness's fault, and who held on.
        armed = "the lock_timeout the harness armed (time_out) ended its wait on a lock"
        read = dataclasses.replace(read, raised=f"{read.raised}; {armed}{holders}")
        self._judge_timed_out(h, op, read, at, answered, rivals)

    def _judge_timed_out(
        self,
        h: Held,
        op: str,
        read: answers.YesNo,
        at: int,
        answered: int,
        rivals: list[Rival],
    ) -> None:
        rolled = [o for o, txn, committed in rivals if o.txn is not txn and not committed]
        if rolled:
            self.core.say(
                f"  not judged: the {op} of {h.label} timed out on a lock while "
                f"{rolled[0].name}'s transaction was open, which then rolled back"
            )
            return
        still = [o for o, txn, _ in rivals if o.txn is txn]
        if still:
            other = still[0]
            again = partial(self._judge_timed_out, h, op, read, at, answered, rivals)
            assert other.txn is not None
            other.txn.append(again)
            other.undo.append(again)
            self.core.say(
                f"  {h.label}'s {op} timed out while {other.name} held a transaction open: "
                "judged once it commits, not judged if it rolls back"
            )
            return
        _answer(self.core, h, op, read, at, answered)


def _holds(other: Worker, held: Held) -> bool:
    """Return whether `other` holds `held`'s job (a claim of it in its open transaction):
    then the wait was on that job's row, as far as anyone can tell."""
    return any(o.claim.job_id == held.claim.job_id for o in other.held)


def _held_by(rivals: list[Worker]) -> str:
    """Return the open transactions a timed-out call may have waited on, in words: `, while
    w1's transaction (open since t=3s; w1 holds w1:job1#2) was open`; empty for none. What
    a worker holds are its claims, which need not be what its transaction locked."""
    said = []
    for o in rivals:
        held = ", ".join(h.label for h in o.held)
        holding = f"; {o.name} holds {held}" if held else ""
        said.append(f"{o.name}'s transaction (open since t={seconds(o.began)}{holding})")
    if not said:
        return ""
    return f", while {' and '.join(said)} {'was' if len(said) == 1 else 'were'} open"


class _Trips(Gate):
    """Counts the round trips of one call sent under a lock timeout, to tell which of them
    timed out: its first, or a later one, once earlier statements of the call have run
    (and, in autocommit, committed: the call ends halfway, its first part kept).

    It stands in the connection's gate for the call (passing each round trip on to the
    call's own gate, when it is preempted), so it never parks anything itself. A round
    trip sent while the lock timeout's error is being handled (the ROLLBACK of the call's
    `with transaction()`, say) is the clean-up after the failed one, not a statement that
    timed out: the count of the one that did is kept when the first such trip passes."""

    def __init__(self) -> None:
        super().__init__(after=1)
        self.inner: Gate | None = None
        self.before_clean_up: int | None = None

    def passing(self) -> None:
        """Count a round trip (on the call's thread), then pass the call's own gate."""
        handling = sys.exc_info()[1]
        timed_out = answers.underlying(handling, psycopg.errors.LockNotAvailable)
        if self.before_clean_up is None and timed_out is not None:
            self.before_clean_up = self.trips
        self.trips += 1
        if self.inner is not None:
            self.inner.passing()

    @property
    def timed_out_at(self) -> int:
        """Return the round trip, counting from 1, whose lock wait the timeout ended."""
        return self.trips if self.before_clean_up is None else self.before_clean_up

    def counting(self, fn: Callable[[Connection[Any]], Any]) -> Callable[[Connection[Any]], Any]:
        """Return `fn` with this counter in its connection's gate while it runs."""

        def counted(conn: Connection[Any]) -> Any:
            if not isinstance(conn, GatedConnection):
                return fn(conn)
            self.inner, conn.gate = conn.gate, self
            try:
                return fn(conn)
            finally:
                conn.gate = self.inner

        return counted


def _answer(
    core: Core,
    h: Held,
    op: str,
    read: answers.YesNo,
    at: int,
    answered: int,
    lease_from: int | None = None,
) -> None:
    """Hand one judged answer of `h`'s grant to the judge (a claim never committed has
    no grant: nothing to judge); `lease_from`: the instant a heartbeat's now() read."""
    if h.grant is not None:
        core.judge.answer(op, h.grant, read.yes, at, answered, read.raised, lease_from)
