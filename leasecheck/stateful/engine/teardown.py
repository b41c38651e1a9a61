"""The teardown that judges the end: heal every worker, finish held work, drain the queue.

After the last move every paused worker resumes, every paused call goes on, held
transactions commit (or roll back, if PostgreSQL aborted them), what is still blocked
is crashed, and each live worker completes what it holds. Then the queue is drained,
claim after claim, and every property is judged once more, no-lost-jobs last.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg

from leasecheck.stateful.engine import answers
from leasecheck.stateful.engine.answers import Outcome, Raised
from leasecheck.stateful.engine.calls import Calls
from leasecheck.stateful.engine.core import Core, seconds
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.units import LEASE


def heal_and_drain(core: Core, calls: Calls) -> None:
    """Bring the example to rest and judge the end (see the module's docstring)."""
    _Teardown(core, calls).heal_and_drain()


class _Teardown:
    """One example's end, on its core and calls (the fixed parts of the core at hand)."""

    def __init__(self, core: Core, calls: Calls) -> None:
        self.core = core
        self.calls = calls
        self.queue = core.queue
        self.caps = core.caps
        self.history = core.history
        self.judge = core.judge
        self.oracle = core.oracle
        self.pool = core.pool
        self.scheduler = core.scheduler

    def heal_and_drain(self) -> None:
        self.core.say(
            f"t={seconds(self.core.now)} teardown: heal every worker, finish held work, drain"
        )
        self.scheduler.armed.clear()  # nothing the teardown sends is preempted
        self.calls.timeouts.clear()  # nor times out
        self.scheduler.holds.clear()
        for w in self.core.workers:
            if w.paused:
                self.core.resume(w)
        while self.core.parked():  # paused calls go on, oldest first
            self.scheduler.resume_call(min(self.core.parked(), key=lambda w: w.main.invoked))
        for w in self.core.workers:  # workers finish their transactions; blocked calls go on
            if w.txn is not None and w.waiting is None:
                failed = w.main.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
                if failed:
                    w.main.conn.execute("rollback")
                    self.history.add(self.core.now, w.name, "rollback", "event")
                    self.core.end_txn(w, commit=False, why="teardown")
                elif self.core.committed(w):
                    self.history.add(self.core.now, w.name, "commit", "event")
                    self.core.end_txn(w, commit=True, why="teardown")
                self.scheduler.settle()
        for w in list(self.core.workers):
            if w.waiting is not None or w.txn is not None:
                self.core.replace(w, "still blocked at teardown")
        if self.core.sweeper is not None and self.core.sweeper.waiting is not None:
            old = self.core.sweeper.main  # still blocked once every worker has let go: end it
            self.pool.terminate(old)
            self.scheduler.settle()
            self.core.sweeper.main = self.pool.open("sweeper")
            self.pool.release(old)
        for w in self.core.workers:  # a live worker finishes the work it holds
            for h in list(w.held):
                if h.grant is not None:
                    self.calls.complete(w, h)
        self.scheduler.settle()
        self.core.check()
        self._drain()
        self.core.check()
        for v in self.oracle.ledger.deferred:
            self.core.raise_violation(v)
        if self.oracle.observe is None:
            return  # no-lost-jobs needs the queue's state(): a named gap, never a pass
        self.judge.drained()
        self.core.check()

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
        self.calls.advance(max([self.core.now, *ends]) + 1)
        drainer = self.core.workers[0]
        claims = len(self.core.jobs) * ((self.queue.max_attempts or 1) + 2) + 5
        budget, wait, waits = claims, LEASE, 0
        while budget:
            if self.caps.maintain is not None:
                self.calls.maintain()
            before = len(drainer.held)
            self.calls.timeouts.send(
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
                    self.core.now, "clock", "advance", "event", value=seconds(self.core.now + wait)
                )
                self.core.say(
                    f"t={seconds(self.core.now)} drain: a job is still pending; the clock moves on"
                )
                self.calls.advance(self.core.now + wait)
                wait, waits = wait * 2, waits + 1
                continue
            budget -= 1
            self.calls.complete(drainer, drainer.held[-1])
            self.scheduler.settle()
        raise AssertionError(f"the queue was not drained after {claims} claims")

    def _pending(self) -> bool:
        """Return whether the queue shows a job still queued or running (False without state)."""
        if self.caps.state is None:
            return False  # the machine's own look, not the judge's: not recorded as a fact
        return any(
            self.core.observe(job_id) in ("queued", "running") for job_id in self.oracle.jobs
        )

    def _drained(self, w: Worker) -> answers.Done:
        def done(outcome: Outcome, at: int) -> None:
            result = answers.claim(self.queue.name, outcome)
            if result is None:
                if isinstance(outcome, Raised):
                    self.judge.raised("claim", at, outcome.quote)
                return
            claim = answers.checked(self.queue.name, "claim", result)
            label = f"drain:{self.core.job_label(claim)}#{claim.token!r}"
            held = Held(claim=claim, label=label, raw=result)
            key = self.queue.effect_key(result)
            answered = self.history.events[-1].seq
            sent = self.scheduler.answering
            answered_at = self.core.now if sent is not None else None
            held.grant = self.judge.grant(claim, label, at, key, answered, sent, answered_at)
            w.held.append(held)

        return done
