"""The driver: the moves of simulated workers, and the teardown that judges the end.

Every move a rule can make is a method here with plain arguments (indices into the
eligible workers or claims, modulo their count), and each `can_*` predicate says,
from the model alone, whether the move means something now. Hypothesis's rules
(`stateful.machine`) are a thin shell over these; a replay and the explorer drive
them directly. Nothing here imports Hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.stateful.contract import ContractError
from leasecheck.stateful.engine import answers, replan
from leasecheck.stateful.engine.answers import Done, Outcome, Raised
from leasecheck.stateful.engine.calls import Calls
from leasecheck.stateful.engine.core import MAX_JOBS, seconds
from leasecheck.stateful.engine.moves import Stall, Take
from leasecheck.stateful.engine.priorities import Priorities
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.sqlfile import load
from leasecheck.stateful.units import BEAT, LEASE, SECOND

FAULTS = load(Path(__file__).with_name("faults.sql"))

_INERROR = psycopg.pq.TransactionStatus.INERROR


class Driver(Calls):
    """Moves workers, time and faults; judges after every move and at the end."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeouts: set[str] = set()
        """Workers whose calls run with a lock timeout set, until one of them times out."""
        self.timed_out: dict[
            int, tuple[str | None, list[tuple[Worker, list[Callable[[], None]], list[bool]]]]
        ] = {}
        """Claims (by id) whose call a lock timeout ended: why it is not judged at all (a
        lock it may have waited on that says nothing of its own job), and each other
        worker's open transaction (its updates list, and whether it committed)."""

    # -------------------------------------------------------------------- moves

    def start(
        self, workers: int, order: Sequence[int] | None = None, changes: Sequence[int] = ()
    ) -> None:
        """Start the workers and enqueue the first job (an example without one is wasted).

        With `order`, the workers' own moves follow a priority schedule that changes
        after the steps `changes` (`stateful.engine.priorities`).
        """
        if order is not None:
            self.priorities = Priorities(order=list(order), changes=list(changes))
        with self._step():
            self.workers = [self._new_worker(f"w{i}") for i in range(workers)]
            self._enqueue()

    def enqueue(self, jobs: int) -> None:
        """The producer adds jobs (never more than MAX_JOBS in one example).

        It takes an argument only so that it sorts after `asleep` and `claim`: see
        `stateful.engine.moves`.
        """
        with self._step():
            for _ in range(min(jobs, MAX_JOBS - len(self.jobs))):
                self._enqueue()

    def replan(self, grow: int) -> None:
        """ANALYZE the queue's tables while they are tiny, then the producer adds `grow`
        jobs: the planner now believes the tables hold what they held (`stateful.engine.replan`)."""
        with self._step():
            names = replan.analyze(self.pool.monitor, self.h.replanned)
            note = f"analyze {', '.join(names)} at {len(self.jobs)} jobs"
            self.history.add(self.now, "planner", "replan", "event", note=note)
            self.say(f"t={seconds(self.now)} {note}")
            for _ in range(min(grow, MAX_JOBS - len(self.jobs))):
                self._enqueue()
            self._saw("tiny tables analyzed, then grown")

    def claim(self, how: Take, level: str | None = None) -> None:
        """A worker claims the next job; with `held`, inside a transaction it keeps open
        (at isolation `level`, if given: `stateful.engine.isolation`)."""
        with self._step():
            w = self._pick_own(self._claimers(), how.worker)
            if how.held and w.txn is None and "claim" in self.caps.held_calls:
                self._begin(w, level)
            self._claim(w)

    def claim_batch(self, pick: int, size: int) -> None:
        """A worker claims up to `size` jobs in one call (`claim_many`)."""
        with self._step():
            self._claim_many(self._pick_own(self._claimers(), pick), size)

    def complete_batch(self, pick: int, size: int) -> None:
        """A worker completes up to `size` of the jobs it holds, newest first, in one call
        (`complete_many`), stale claims and all: a fresh claim leads, a stale one follows."""
        with self._step():
            holders = [w for w in self.workers if w.can_act and self._may(w, "complete") and w.held]
            w = self._pick_own(holders, pick)
            self._complete_many(w, w.held[::-1][:size])

    def heartbeat(self, pick: int) -> None:
        """An explicit heartbeat on the main connection (inside the held transaction, if any)."""
        with self._step():
            self._heartbeat(*self._pick_pair(pick, "heartbeat"))

    def complete(self, pick: int) -> None:
        """A worker finishes a job it holds, whether or not its lease is still good."""
        with self._step():
            w, h = self._pick_pair(pick, "complete")
            self._complete(w, h)

    def send_effect(self, pick: int) -> None:
        """A worker sends the job's external effect (a receipt) keyed by effect_key."""
        with self._step():
            self._send(*self._pick_pair(pick, "send"))

    def fail(self, pick: int) -> None:
        """A worker reports that a job it holds failed (retry, or give up at the cap)."""
        with self._step():
            self._fail(*self._pick_pair(pick, "fail"))

    def pause(self, pick: int) -> None:
        """SIGSTOP: the worker takes no steps and sends no heartbeats until resumed."""
        with self._step():
            w = self._pick([w for w in self.workers if not w.paused], pick)
            w.paused = True
            self.history.add(self.now, w.name, "pause", "event")
            self.say(f"t={seconds(self.now)} {w.name} pauses")

    def resume(self, pick: int) -> None:
        """SIGCONT: the worker acts again; its overdue heartbeats fire at the next tick."""
        with self._step():
            self._resume(self._pick([w for w in self.workers if w.paused], pick))

    def asleep(self, how: Stall) -> None:
        """The story's pause in one step: a worker sleeps past the end of its lease, then wakes.

        Unless it sleeps `alone`, the first other worker that can act claims meanwhile.
        `then` is what the woken worker does first with the job it was working on,
        not knowing whether it still owns it: complete, fail, heartbeat or nothing; or,
        for a queue with batches, `batch`: a batch worker's loop, which fetches once
        more and then acknowledges everything it holds in one batch. A completion or
        failure report that answered is followed by the worker's next claim, as its loop
        goes on: a stale report that made the job visible again shows at once.
        (Named to sort first among the rules: see `stateful.engine.moves`.)
        """
        with self._step():
            w = self._pick([w for w in self.workers if not w.paused and w.granted], how.worker)
            w.paused = True
            work = max(w.granted, key=lambda h: h.grant.lease_end if h.grant else 0)
            end = work.grant.lease_end if work.grant else self.now
            self.say(f"t={seconds(self.now)} {w.name} stalls past {seconds(end)}")
            self.history.add(self.now, w.name, "pause", "event", note="stall")
            self._advance(max(end + 1, self.now + 1))
            others = [o for o in self._claimers() if o is not w]
            if not how.alone and others:
                if self.caps.maintain is not None:
                    self._maintain()  # the queue's recovery runs while the worker sleeps
                rival = others[0]
                holds = how.rival != "commits" and "claim" in self.caps.held_calls
                if holds and rival.txn is None:
                    self._begin(rival)  # its claim's row lock outlasts the step
                self._claim(rival)
                if holds and how.rival == "holds, lock_timeout" and w.name not in self.timeouts:
                    self._arm_timeout(w.name)
            self._resume(w)
            then = how.then
            if then == "heartbeat" and not self.caps.heartbeats:
                then = "nothing"
            if then == "batch" and not self._batches():
                then = "complete"
            if then == "batch":
                self._fetch_and_ack(w)
                return
            if then != "nothing" and work in w.held and w.can_act and self._may(w, then):
                {"complete": self._complete, "fail": self._fail, "heartbeat": self._heartbeat}[
                    then
                ](w, work)
                # Its loop goes on and it claims again, once the report has answered: a
                # report paused or blocked in flight leaves it unable to act (no claimer).
                if then != "heartbeat" and w in self._claimers() and self.unfinished():
                    self._claim(w)

    def crash(self, pick: int) -> None:
        """The worker's process dies: its connections close, mid-transaction or not."""
        with self._step():
            w = self._pick(self._busy(), pick)
            self.say(f"t={seconds(self.now)} {w.name} crashes")
            self._replace(w, "crashed")

    def restart(self, pick: int) -> None:
        """The worker's process dies and a new one starts under the SAME worker name,
        holding nothing, while the old process's claims may still be unexpired (a
        supervisor's restart, a pod that keeps its hostname). The queue sees one name
        for two processes; the story calls the new one `w1.3` and says whose name it has."""
        with self._step():
            w = self._pick(self._busy(), pick)
            fresh = self._replace(w, "restarted", same_name=True)
            said = f"restarts: {fresh.name} comes up under the old name {fresh.known_as}"
            self.say(f"t={seconds(self.now)} {w.name} {said}")
            if any(h.grant is not None and self._owns(h) for h in w.held):
                self._saw("worker restarted under its name while it held a lease")

    def cut(self, pick: int) -> None:
        """The server ends the worker's backend; the worker reconnects and keeps its claims."""
        with self._step():
            w = self._pick([w for w in self.workers if w.txn is not None or w.waiting], pick)
            self.say(f"t={seconds(self.now)} {w.name}'s connection is cut")
            self.pool.terminate(w.main)
            self._settle()
            if w.txn is not None:
                self._end_txn(w, commit=False, why="connection cut")
            old = w.main
            w.main = self.pool.open(w.name)
            self.pool.release(old)
            self.history.add(self.now, w.name, "cut", "event", note="backend terminated")

    def sweep(self, after: str) -> None:
        """The queue's own recovery (`maintain`) runs on a connection of its own, now or
        just after the next lease ends; it may block behind a worker's open transaction."""
        with self._step():
            ends = self._lease_ends()
            if after == "past-lease-end" and ends:
                self.history.add(self.now, "clock", "advance", "event", value=seconds(ends[0] + 1))
                self._advance(ends[0] + 1)
            self._maintain()

    NEAR_END = {"before-lease-end": -1, "lease-end": 0, "past-lease-end": 1}
    """Where a move to the next lease end lands: a microsecond before it, on it, after it."""

    def time_passes(self, to: str) -> None:
        """Let time pass; running workers' heartbeats fire on schedule meanwhile.

        Next to a lease end the clock lands a microsecond before, on or after it: a
        queue that counts a lease as run out early (or late) shows it only there, as
        every other move lands on whole seconds from a claim."""
        with self._step():
            ends = [e for e in self._lease_ends() if e + self.NEAR_END.get(to, 0) > self.now]
            why = to
            if to in self.NEAR_END and ends:
                target = ends[0] + self.NEAR_END[to]
            else:
                target = self.now + (BEAT if to == "beat" else SECOND)
                if to in self.NEAR_END:
                    why = f"{to}: no lease ends ahead, so 1 s"
            self.history.add(self.now, "clock", "advance", "event", value=seconds(target))
            self.say(f"t={seconds(self.now)} clock advances to {seconds(target)} ({why})")
            self._advance(target)

    def open_transaction(self, pick: int, level: str | None = None) -> None:
        """Open a transaction the worker's next calls run inside, held across steps (at
        isolation `level`, if given: `stateful.engine.isolation`).

        It is the application's transaction, which reads before it calls the queue: above
        READ COMMITTED its snapshot is taken now, so whatever commits before the next call
        (the worker's own heartbeat, a reclaim) is a concurrent update to that call. A
        claim `held` opens one whose snapshot is the queue's first statement's instead."""
        with self._step():
            w = self._pick_own([w for w in self.workers if w.can_act and w.txn is None], pick)
            self._begin(w, level, snapshot=FAULTS["take_snapshot"].text)

    def work_in_transaction(self, pick: int, level: str | None = None) -> None:
        """A worker runs its job's body inside the application's transaction, as a task
        wrapped in one does: it begins (at `level`) and reads, works for a heartbeat
        interval while its heartbeat connection renews the lease, completes the job in
        the transaction and commits. Above READ COMMITTED the renewal is a concurrent
        update to the completion, whose snapshot predates it (40001)."""
        with self._step():
            pairs = [(w, h) for w, h in self._pairs("complete") if w.txn is None]
            w = self._pick_own(list(dict.fromkeys(w for w, _ in pairs)), pick)
            h = next(h for o, h in reversed(pairs) if o is w)  # its newest job
            self._begin(w, level, snapshot=FAULTS["take_snapshot"].text)
            target = self.now + BEAT
            self.history.add(self.now, "clock", "advance", "event", value=seconds(target))
            self.say(f"t={seconds(self.now)} {w.name} works on {h.label} until {seconds(target)}")
            self._advance(target)
            if h in w.held and w.can_act and w.txn is not None and w.waiting is None:
                self._complete(w, h)
            if w.can_act and w.txn is not None and w.waiting is None:
                self._close(w, commit=True)  # a call still in flight leaves it open

    def close_transaction(self, pick: int, commit: bool) -> None:
        """Commit or roll back a held transaction; calls blocked behind it go on."""
        with self._step():
            w = self._pick_own([w for w in self.workers if w.can_act and w.txn is not None], pick)
            self._close(w, commit)

    def _close(self, w: Worker, commit: bool) -> None:
        self.say(f"t={seconds(self.now)} {w.name} {'commits' if commit else 'rolls back'}")
        if commit and not self._committed(w):
            return
        if not commit:
            w.main.conn.execute("rollback")
        if commit:
            self.history.add(self.now, w.name, "commit", "event")
        self._end_txn(w, commit=commit, why="rolled back by the worker")

    def _committed(self, w: Worker) -> bool:
        """Commit `w`'s held transaction; return False when PostgreSQL aborted it instead.

        Above READ COMMITTED a commit may fail with a serialization failure (40001, a
        SERIALIZABLE transaction in a dependency cycle): the transaction rolled back, so
        every call in it is void, as when the worker rolls back."""
        try:
            w.main.conn.execute("commit")
        except psycopg.errors.SerializationFailure as exc:
            quote = answers.Raised(exc).quote
            self._saw("serialization failure in a held transaction")
            self.say(f"t={seconds(self.now)} {w.name}'s commit failed: {quote}")
            self._end_txn(w, commit=False, why=f"its commit failed: {quote}")
            return False
        return True

    def preempt(self, pick: int, after: int, hold: int | None = None) -> None:
        """Arm an actor (a worker, or the queue's sweeper): its next call that sends more
        than `after` round trips is paused after `after` of them, between two of its
        statements (shorter calls before it run whole), and goes on by itself after
        `hold` further steps, or sooner by `resume_call`; without `hold`, only then."""
        with self._step():
            name = self._pick_name(self._preemptible(), pick)
            self.armed[name] = after
            if hold is not None:
                self.holds[name] = hold
            steps = "" if hold is None else f", for {hold} step{'s' * (hold != 1)}"
            note = f"after statement {after}{steps}"
            self.history.add(self.now, name, "preempt", "event", note=note)
            said = f"its next call of more statements pauses after statement {after}"
            self.say(f"t={seconds(self.now)} {name}: {said}")

    def resume_call(self, pick: int) -> None:
        """A call paused between its statements goes on; it may answer, or block on a lock."""
        with self._step():
            self._resume_call(self._pick(self._parked(), pick))

    def time_out(self, pick: int) -> None:
        """Arm a worker as a production `lock_timeout` would: its calls run with the
        real setting on their session until one of them waits on a lock, which
        PostgreSQL then ends with lock_not_available (55P03), the queue's answer.

        Deterministic: the only lock waits a step lets last are on transactions held
        between steps (or calls paused or blocked in them), which nothing releases
        within the step, so the wait surely outlasts the timeout (1 ms); `settle`
        never counts such a call as held still, it waits until PostgreSQL ends it.
        A call that waits on nothing answers as it would have."""
        with self._step():
            self._arm_timeout(self._pick_name(self._timeoutable(), pick))

    def _arm_timeout(self, name: str) -> None:
        self.timeouts.add(name)
        self.history.add(self.now, name, "time_out", "event", note="lock_timeout armed")
        self.say(f"t={seconds(self.now)} {name}: its next call that waits on a lock times out")

    def _timeoutable(self) -> list[str]:
        return [w.name for w in self.workers if w.can_act and w.name not in self.timeouts]

    def _call(
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
        if beat or w.name not in self.timeouts:
            super()._call(w, op, held, fn, self._noting(done), **kw)
            return
        session = w.main
        session.conn.execute(FAULTS["arm_lock_timeout"].text)
        session.times_out = True
        since = len(self.ended)  # transactions that end from now on were open in its flight

        def timed(outcome: Outcome, at: int) -> None:
            session.times_out = False
            if not session.broken and session.conn.info.transaction_status != _INERROR:
                session.conn.execute(FAULTS["disarm_lock_timeout"].text)
            error = outcome.error if isinstance(outcome, Raised) else None
            if isinstance(error, psycopg.errors.LockNotAvailable):
                self.timeouts.discard(w.name)
                self._saw("call timed out on a lock")
                # a batch completion's claims are its releases, not its `held`
                batch = [held] if held is not None else list(releases)
                for h in batch:
                    self._rivals_of(w, h, [o for o in batch if o is not h], since)
            done(outcome, at)

        super()._call(w, op, held, fn, self._noting(timed), **kw)

    def _noting(self, done: Done) -> Done:
        """Count a serialization failure (40001) the queue answered with, then read it."""

        def noted(outcome: Outcome, at: int) -> None:
            error = outcome.error if isinstance(outcome, Raised) else None
            if isinstance(error, psycopg.errors.SerializationFailure):
                self._saw("serialization failure in a held transaction")
            done(outcome, at)

        return noted

    def _rivals_of(self, w: Worker, held: Held, batch: Sequence[Held] = (), since: int = 0) -> None:
        """Note what a timed-out call may have waited for: the other workers' open
        transactions (each marked so its commit is known), one that rolled back while
        the call was in flight (`self.ended[since:]`: a crash may end it before the
        answer is read), or a call in flight; for one claim of a batch, also the rows of
        its batch's other jobs, which an open transaction may have locked: then the wait
        says nothing of this claim's job."""
        why = None
        if any(o is not w and o.waiting is not None and not o.crashed for o in self._actors()):
            why = "while another call was in flight, which may have held it"
        rolled = [name for name, ok in self.ended[since:] if not ok and name != w.name]
        if rolled and why is None:
            why = f"while {rolled[0]}'s transaction was open, which then rolled back"
        rivals: list[tuple[Worker, list[Callable[[], None]], list[bool]]] = []
        others = {o.claim.job_id for o in batch} - {held.claim.job_id}
        for other in self.workers:
            if other is not w and other.txn is not None:
                committed: list[bool] = []
                other.txn.append(partial(committed.append, True))
                rivals.append((other, other.txn, committed))
                locked = [self._job_label(o.claim) for o in other.held if o.claim.job_id in others]
                if locked and why is None:
                    why = (
                        f"with {locked[0]} in its batch, which {other.name}'s open "
                        "transaction holds: the wait may have been on that job's row"
                    )
        if why is not None or rivals:
            self.timed_out[id(held)] = (why, rivals)

    def _judge(
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
        claim of a batch, when an open transaction held another job of the batch (the
        wait, and so the refusal, may be that job's)."""
        waited = self.timed_out.pop(id(h), None)
        if waited is None or read.raised is None:
            super()._judge(h, op, read, at, answered, lease_from)
            return
        why, rivals = waited
        if why is not None:
            self.say(f"  not judged: the {op} of {h.label} timed out on a lock {why}")
            return
        self._judge_timed_out(h, op, read, at, answered, rivals)

    def _judge_timed_out(
        self,
        h: Held,
        op: str,
        read: answers.YesNo,
        at: int,
        answered: int,
        rivals: list[tuple[Worker, list[Callable[[], None]], list[bool]]],
    ) -> None:
        rolled = [o for o, txn, committed in rivals if o.txn is not txn and not committed]
        if rolled:
            self.say(
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
            self.say(
                f"  {h.label}'s {op} timed out while {other.name} held a transaction open: "
                "judged once it commits, not judged if it rolls back"
            )
            return
        Calls._judge(self, h, op, read, at, answered)

    def _preemptible(self) -> list[str]:
        names = [w.name for w in self.workers if w.can_act]
        if self.caps.maintain is not None and (self.sweeper is None or self.sweeper.can_act):
            names.append("sweeper")
        return [n for n in names if n not in self.armed]

    @staticmethod
    def _pick_name(names: list[str], pick: int) -> str:
        return names[pick % len(names)]

    # --------------------------------------------------------------- predicates
    # Whether a move means something now, read from the model alone (never the
    # database), so the same program offers the same moves on every run.

    def unfinished(self) -> bool:
        return any(not j.finished for j in self.oracle.jobs.values())

    def can_enqueue(self) -> bool:
        return len(self.jobs) < MAX_JOBS

    def can_replan(self) -> bool:
        return len(self.jobs) < MAX_JOBS and self.h.can_replan()

    def can_claim(self) -> bool:
        return bool(self._claimers()) and self.unfinished()

    def can_claim_batch(self) -> bool:
        return self._batch_claims() and self.can_claim()

    def can_complete_batch(self) -> bool:
        return self._batches() and bool(self._pairs("complete"))

    def can_heartbeat(self) -> bool:
        return self.caps.heartbeats and bool(self._pairs("heartbeat"))

    def can_call(self, call: str) -> bool:
        """Whether some worker holds a claim it may `call` (complete, fail, send) now."""
        return bool(self._pairs(call))

    def can_pause(self) -> bool:
        return any(not w.paused for w in self.workers)

    def can_resume(self) -> bool:
        return any(w.paused for w in self.workers)

    def can_stall(self) -> bool:
        return any(not w.paused and w.granted for w in self.workers)

    def can_crash(self) -> bool:
        return bool(self._busy())

    def can_restart(self) -> bool:
        return self.h.restarts and bool(self._busy())

    def can_cut(self) -> bool:
        return any(w.txn is not None or w.waiting for w in self.workers)

    def can_sweep(self) -> bool:
        return self.caps.maintain is not None and (
            self.sweeper is None or self.sweeper.waiting is None
        )

    def can_open_transaction(self) -> bool:
        return bool(self.caps.held_calls) and any(w.can_act and w.txn is None for w in self.workers)

    def can_time_out(self) -> bool:
        # Only a lock held across steps can make a call wait: a transaction held open, or
        # a call paused or blocked in one. Without one, arming would time out nothing.
        holding = any(w.txn is not None or w.waiting is not None for w in self._actors())
        return holding and bool(self._timeoutable())

    def can_preempt(self) -> bool:
        return bool(self._preemptible())

    def can_resume_call(self) -> bool:
        return bool(self._parked())

    def can_work_in_transaction(self) -> bool:
        return "complete" in self.caps.held_calls and any(
            w.txn is None for w, _ in self._pairs("complete")
        )

    def can_close_transaction(self) -> bool:
        return any(w.can_act and w.txn is not None for w in self.workers)

    def check(self) -> None:
        """Judge every property now; raise the first violation's exception."""
        try:
            self._check()
        except ContractError:  # a state() answer outside the contract, read to judge
            self._contract_broken()
            raise

    # ----------------------------------------------------------------- teardown

    def teardown(self) -> None:
        try:
            if not self.broken and self.workers:
                self._heal_and_drain()
        except ContractError:
            self._contract_broken()
            raise
        finally:
            self._clean_up()

    def _heal_and_drain(self) -> None:
        self.say(f"t={seconds(self.now)} teardown: heal every worker, finish held work, drain")
        self.armed.clear()  # nothing the teardown sends is preempted
        self.timeouts.clear()  # nor times out
        self.holds.clear()
        for w in self.workers:
            if w.paused:
                self._resume(w)
        while self._parked():  # paused calls go on, oldest first
            self._resume_call(min(self._parked(), key=lambda w: w.main.invoked))
        for w in self.workers:  # workers finish their transactions; blocked calls go on
            if w.txn is not None and w.waiting is None:
                failed = w.main.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
                if failed:
                    w.main.conn.execute("rollback")
                    self.history.add(self.now, w.name, "rollback", "event")
                    self._end_txn(w, commit=False, why="teardown")
                elif self._committed(w):
                    self.history.add(self.now, w.name, "commit", "event")
                    self._end_txn(w, commit=True, why="teardown")
                self._settle()
        for w in list(self.workers):
            if w.waiting is not None or w.txn is not None:
                self._replace(w, "still blocked at teardown")
        if self.sweeper is not None and self.sweeper.waiting is not None:
            old = self.sweeper.main  # still blocked once every worker has let go: end it
            self.pool.terminate(old)
            self._settle()
            self.sweeper.main = self.pool.open("sweeper")
            self.pool.release(old)
        for w in self.workers:  # a live worker finishes the work it holds
            for h in list(w.held):
                if h.grant is not None:
                    self._complete(w, h)
        self._settle()
        self._check()
        self._drain()
        self._check()
        for v in self.oracle.ledger.deferred:
            self._raise(v)
        if self.oracle.observe is None:
            return  # no-lost-jobs needs the queue's state(): a named gap, never a pass
        self.judge.drained()
        self._check()

    DRAIN_WAITS = 10
    """How often the drain waits for a scheduled retry, doubling the wait from one lease."""

    def _drain(self) -> None:
        """Claim and complete until the queue hands out nothing and shows nothing pending.

        The queue's recovery sweep runs before each claim. When nothing is handed out
        but the queue still shows a job queued or running (a retry scheduled for
        later, a lease that must run out first), the clock moves on, one lease and
        then twice the last wait, until it is handed out or the waits run out.
        """
        ends = [g.lease_end for j in self.oracle.jobs.values() for g in j.grants]
        self._advance(max([self.now, *ends]) + 1)
        drainer = self.workers[0]
        claims = len(self.jobs) * ((self.queue.max_attempts or 1) + 2) + 5
        budget, wait, waits = claims, LEASE, 0
        while budget:
            if self.caps.maintain is not None:
                self._maintain()
            before = len(drainer.held)
            self._call(
                drainer,
                "claim",
                None,
                lambda c: self.queue.claim(c, "drain", timedelta(microseconds=LEASE)),
                self._drained(drainer),
            )
            if len(drainer.held) == before:
                if waits == self.DRAIN_WAITS or not self._pending():
                    return
                self.history.add(
                    self.now, "clock", "advance", "event", value=seconds(self.now + wait)
                )
                self.say(f"t={seconds(self.now)} drain: a job is still pending; the clock moves on")
                self._advance(self.now + wait)
                wait, waits = wait * 2, waits + 1
                continue
            budget -= 1
            self._complete(drainer, drainer.held[-1])
            self._settle()
        raise AssertionError(f"the queue was not drained after {claims} claims")

    def _pending(self) -> bool:
        """Return whether the queue shows a job still queued or running (False without state)."""
        if self.caps.state is None:
            return False  # the machine's own look, not the judge's: not recorded as a fact
        return any(self._observe(job_id) in ("queued", "running") for job_id in self.oracle.jobs)

    def _drained(self, w: Worker) -> answers.Done:
        def done(outcome: Outcome, at: int) -> None:
            result = answers.claim(self.queue.name, outcome)
            if result is None:
                if isinstance(outcome, Raised):
                    self.judge.raised("claim", at, outcome.quote)
                return
            claim = answers.checked(self.queue.name, "claim", result)
            label = f"drain:{self._job_label(claim)}#{claim.token!r}"
            held = Held(claim=claim, label=label, raw=result)
            key = self.queue.effect_key(result)
            answered = self.history.events[-1].seq
            sent, answered_at = self.answering, self.now if self.answering is not None else None
            held.grant = self.judge.grant(claim, label, at, key, answered, sent, answered_at)
            w.held.append(held)

        return done
