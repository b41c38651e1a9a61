"""The contract's calls, sent for a worker and read by the one reader of answers.

Each call goes through the scheduler (which may find it blocked on a lock, or
preempt it between statements) and ends in one outcome; `stateful.engine.answers` reads it
the same way for every kind, and the judge gets what the answer means for the grant
it concerns, at commit when the worker holds a transaction open.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

from psycopg import Connection

from leasecheck.stateful import clock
from leasecheck.stateful.contract import BatchEffect
from leasecheck.stateful.engine import answers
from leasecheck.stateful.engine.answers import Answered, Outcome, Raised
from leasecheck.stateful.engine.core import Core, seconds
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.units import BEAT, LEASE


class Calls(Core):
    """Sends heartbeats, claims, completions, failure reports, effects and sweeps."""

    def _beat(self, w: Worker, h: Held) -> None:
        h.next_beat = self.now + BEAT
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            if not self.caps.heartbeat_answers and isinstance(outcome, Answered):
                return  # fire and forget: the lease is kept, the answer unknown
            read = answers.yes_no(self.queue.name, "heartbeat", outcome)
            if not read.judged:
                h.believed = False  # the worker no longer knows whether it holds the job
                return
            if not read.yes:
                h.believed = False
                h.next_beat = None
            if h.grant is not None:
                self.judge.answer("heartbeat", h.grant, read.yes, at, self.now, read.raised)

        self._call(
            w, "heartbeat", h, lambda c: self.queue.heartbeat(c, h.raw, lease), done, beat=True
        )

    def _claim(self, w: Worker) -> None:
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            raw = answers.claim(self.queue.name, outcome)
            if raw is None:
                self._nothing(w, "claim", outcome, at)
                return
            self._granted(w, raw, at)

        self._call(w, "claim", None, lambda c: self.queue.claim(c, w.queue_name, lease), done)

    def _nothing(self, w: Worker, call: str, outcome: Outcome, at: int) -> None:
        """Tell the story of a claim that handed out nothing; an exception is noted for the
        judge, whose no-lost-jobs story quotes it if a job is never handed out again."""
        if isinstance(outcome, Raised):
            self.judge.raised(call, at, outcome.quote)
            self.say(f"t={seconds(at)} {w.name} {call}: nothing, it raised {outcome.quote}")
        else:
            self.say(f"t={seconds(at)} {w.name} {call}: nothing")

    def _granted(self, w: Worker, result: Any, at: int) -> None:
        """Take a claim the queue handed `w` at `at`; the oracle judges it once it commits."""
        claim = answers.checked(self.queue.name, "claim", result)
        began = self._instant(w, at)  # the lease it wrote starts at its now()
        label = f"{w.name}:{self._job_label(claim)}#{claim.token!r}"
        held = Held(claim=claim, label=label, raw=result)
        w.held.append(held)
        key = self.queue.effect_key(result)
        answered = self.history.events[-1].seq  # the line that recorded this answer
        sent = self.answering  # the call, if it was in flight: other grants came meanwhile
        answered_at = self.now if sent is not None else None  # it took the job by then

        def grant() -> None:
            held.grant = self.judge.grant(
                claim, label, at, key, answered, sent, answered_at, lease_from=began
            )
            if w.beat is not None and not w.crashed:
                held.next_beat = self.now + BEAT

        self._apply(w, grant)
        self.say(
            f"t={seconds(at)} {w.name} claims {self._job_label(claim)} "
            f"(token {claim.token!r}, lease until {seconds(began + LEASE)})"
        )

    def _batch_claims(self) -> bool:
        """Whether a worker may claim several jobs in one call (`claim_many`): the jobs
        are then completed one at a time unless the queue completes in batches too."""
        return self.caps.claim_many is not None and not self.caps.one_claim_per_worker

    def _batches(self) -> bool:
        """Whether the queue claims and completes in batches (`complete_many` too)."""
        return self._batch_claims() and self.caps.complete_many is not None

    def _owns(self, h: Held) -> bool:
        """Return whether the judge holds `h`'s grant to be its job's owner now."""
        if h.grant is None:
            return False
        return self.oracle.owner(self.oracle.job(h.claim)) is h.grant

    def _claim_many(self, w: Worker, size: int) -> None:
        claim_many = self.caps.claim_many
        assert claim_many is not None
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            raws = answers.claims(self.queue.name, outcome)
            if not raws:
                self._nothing(w, "claim_many", outcome, at)
            for raw in raws:
                self._granted(w, raw, at)

        self._call(w, "claim_many", None, lambda c: claim_many(c, w.queue_name, lease, size), done)

    def _complete_many(self, w: Worker, batch: list[Held]) -> None:
        complete_many = self.caps.complete_many
        assert complete_many is not None
        owners = {self._owns(h) for h in batch}
        if owners == {True, False}:
            self._saw("batch of stale and fresh claims")
        record = clock.QUERIES["record_effect"].text
        calls = {id(h.raw): next(self.calls) for h in batch}
        rows = {
            id(h.raw): {
                "call_id": calls[id(h.raw)],
                "job": str(h.claim.job_id),
                "token": repr(h.claim.token),
                "worker": h.label,
            }
            for h in batch
        }

        def recorded_effect(conn: Connection[Any], raw: Any) -> None:
            conn.execute(record, rows[id(raw)])

        effect: BatchEffect = recorded_effect
        if not self.caps.transactional_effects:
            for h in batch:
                self._send(w, h)
            effect = _no_batch_effect

        def done(outcome: Outcome, at: int) -> None:
            for h in batch:
                if h in w.held:
                    w.held.remove(h)
            self.db_dirty = True
            reads = answers.answers(self.queue.name, outcome, len(batch))
            for h, read in zip(batch, reads, strict=True):
                call_id = calls[id(h.raw)]
                self.completions[call_id] = (h, read.yes if read.judged else None)
                if not read.judged:  # the connection died under it, or the harness ended it
                    self._release_lost(w, "complete", h, at)
                    continue
                if w.txn is not None:
                    w.txn_calls.append(call_id)
                self.say(f"t={seconds(at)} {w.name} completes {h.label} in a batch: {_said(read)}")
                self._apply(w, partial(self._judge_complete, h, read, at, self.now))

        self._call(
            w,
            "complete_many",
            None,
            lambda c: complete_many(c, [h.raw for h in batch], effect),
            done,
            releases=batch,
        )

    def _heartbeat(self, w: Worker, h: Held) -> None:
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            if not self.caps.heartbeat_answers and isinstance(outcome, Answered):
                self.say(f"t={seconds(at)} {w.name} heartbeats {h.label}: it answers nothing")
                return
            read = answers.yes_no(self.queue.name, "heartbeat", outcome)
            if not read.judged:
                return
            if not read.yes:
                h.believed = False
            said = "extended" if read.yes else _said(read)
            self.say(f"t={seconds(at)} {w.name} heartbeats {h.label}: {said}")
            answered, began = self.now, self._instant(w, at)
            self._apply(w, lambda: self._judge(h, "heartbeat", read, at, answered, began))

        self._call(w, "heartbeat", h, lambda c: self.queue.heartbeat(c, h.raw, lease), done)

    def _judge(
        self,
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
            self.judge.answer(op, h.grant, read.yes, at, answered, read.raised, lease_from)

    def _complete(self, w: Worker, h: Held) -> None:
        call_id = next(self.calls)
        record = clock.QUERIES["record_effect"].text
        params = {
            "call_id": call_id,
            "job": str(h.claim.job_id),
            "token": repr(h.claim.token),
            "worker": h.label,
        }

        def effect(conn: Connection[Any]) -> None:
            conn.execute(record, params)

        if not self.caps.transactional_effects:
            # The library runs the task body before and outside its completion: the
            # body's effect goes to the receiver, and the completion gets no effect.
            self._send(w, h)
            effect = _no_effect

        def done(outcome: Outcome, at: int) -> None:
            if h in w.held:
                w.held.remove(h)
            self.db_dirty = True
            read = answers.yes_no(self.queue.name, "complete", outcome)
            self.completions[call_id] = (h, read.yes if read.judged else None)
            if not read.judged:  # the connection died under it, or the harness ended it
                self._release_lost(w, "complete", h, at)
                return
            if w.txn is not None:
                w.txn_calls.append(call_id)
            self.say(f"t={seconds(at)} {w.name} completes {h.label}: {_said(read)}")
            answered = self.now
            self._apply(w, lambda: self._judge(h, "complete", read, at, answered))

        complete = self.queue.complete
        self._call(w, "complete", h, lambda c: complete(c, h.raw, effect), done, releases=[h])

    def _judge_complete(self, h: Held, read: answers.YesNo, at: int, answered: int) -> None:
        self._judge(h, "complete", read, at, answered)

    def _send(self, w: Worker, h: Held) -> None:
        if h.grant is None:
            self.judge.effect_held_back(h.claim.job_id)
            self.say(
                f"t={seconds(self.now)} {w.name} holds back the effect of uncommitted {h.label}"
            )
            return
        key = self.queue.effect_key(h.raw)
        taken = self.judge.external_effect(h.grant, key)
        self.history.add(
            self.now,
            w.name,
            "send",
            "ok",
            job=self._job_label(h.claim),
            token=repr(h.claim.token),
            value={"key": key, "accepted": taken},
        )
        self.say(
            f"t={seconds(self.now)} {w.name} sends the receipt of {h.label} "
            f"with key {key!r}: {'accepted' if taken else 'dropped as a duplicate'}"
        )

    def _fail(self, w: Worker, h: Held) -> None:
        def done(outcome: Outcome, at: int) -> None:
            if h in w.held:
                w.held.remove(h)
            read = answers.yes_no(self.queue.name, "fail", outcome)
            if not read.judged:
                self._release_lost(w, "fail", h, at)
                return
            self.say(f"t={seconds(at)} {w.name} fails {h.label}: {_said(read)}")
            answered = self.now
            self._apply(w, lambda: self._judge(h, "fail", read, at, answered))

        fail = self.queue.fail
        self._call(w, "fail", h, lambda c: fail(c, h.raw, "job raised"), done, releases=[h])

    def _maintain(self) -> None:
        """Run the queue's recovery sweep, unless its last sweep is still blocked on a lock."""
        maintain = self.caps.maintain
        assert maintain is not None
        sweeper = self._sweeper()
        if sweeper.waiting is not None:
            self.say(f"t={seconds(self.now)} the recovery sweep is still blocked: no second one")
            return
        if any(w.txn is not None or w.waiting is not None for w in self.workers):
            self._saw("sweep raced an open transaction")

        def done(outcome: Outcome, at: int) -> None:
            if isinstance(outcome, Raised):
                self.judge.raised("maintain", at, outcome.quote)
                self.say(f"t={seconds(at)} the queue's recovery sweep raised {outcome.quote}")
            elif isinstance(outcome, Answered):
                self.say(f"t={seconds(at)} the queue's recovery sweep ran")

        self._call(sweeper, "maintain", None, maintain, done)

    def _fetch_and_ack(self, w: Worker) -> None:
        """Claim once more, then complete everything `w` holds, newest first, in one batch."""
        if w in self._claimers():
            self._claim(w)
        if w.held and w.can_act and self._may(w, "complete"):
            self._complete_many(w, w.held[::-1])


def _said(read: answers.YesNo) -> str:
    """Say what a judged yes/no answer was, quoting an exception."""
    if read.yes:
        return "accepted"
    return f"refused, it raised {read.raised}" if read.raised else "rejected"


def _no_effect(conn: Connection[Any]) -> None:
    """The completion's effect when the library runs the task body outside it."""


def _no_batch_effect(conn: Connection[Any], claim: Any) -> None:
    """A batch completion's effect when the library runs the task bodies outside it."""
