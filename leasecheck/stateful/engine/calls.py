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
from leasecheck.stateful.engine.scheduler import plain
from leasecheck.stateful.engine.timeouts import LockTimeouts
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.units import BEAT, LEASE


class Calls:
    """Sends heartbeats, claims, completions, failure reports, effects and sweeps, and
    moves time (firing heartbeats as they fall due): a facade over the core's scheduler."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.queue = core.queue
        self.caps = core.caps
        self.pool = core.pool
        self.history = core.history
        self.judge = core.judge
        """Every answer goes to the judge, which writes it down as a fact and judges it."""
        self.oracle = core.oracle
        self.timeouts = LockTimeouts(core)
        """Every call goes through here: a worker armed by `time_out` sends with a lock
        timeout set, and the refusals it gives wait for their verdict."""

    # ------------------------------------------------------------ time and jobs

    def enqueue(self) -> None:
        """The producer adds one job, on the monitor (a producer is no worker)."""
        label = f"job{len(self.core.jobs) + 1}"
        self.history.add(self.core.now, "producer", "enqueue", "invoke", job=label)
        job_id = self.queue.enqueue(
            self.pool.monitor, {"n": len(self.core.jobs) + 1, "kind": "receipt"}
        )
        self.judge.enqueued(job_id, label)
        self.core.jobs.append(label)
        self.history.add(self.core.now, "producer", "enqueue", "ok", job=label, value=plain(job_id))
        self.core.say(f"t={seconds(self.core.now)} enqueue {label}")
        # One microsecond per job, so no two jobs share a timestamp (an order by time
        # never rests on a tie-break the queue leaves to chance), and no claim shares
        # its job's instant (a queue may hand out only jobs due strictly before now).
        self.advance(self.core.now + 1)

    def advance(self, target: int) -> None:
        """Move time to `target`, firing running workers' heartbeats when they fall due."""
        while True:
            due = [
                (h.next_beat, i, w, h)
                for i, w in enumerate(self.core.workers)
                if not w.paused and not w.crashed and w.beat_waiting is None
                for h in w.granted
                if h.believed and h.next_beat is not None
            ]
            due = [d for d in due if d[0] is not None and d[0] <= target]
            if not due:
                break
            when = min(d[0] for d in due if d[0] is not None)
            self._set_clock(when)
            for _, _, w, h in sorted(((d for d in due if d[0] == when)), key=lambda d: d[1]):
                if w.beat_waiting is None:
                    self.beat(w, h)
        self._set_clock(target)

    def _set_clock(self, target: int) -> None:
        delta = target - self.core.now
        if delta <= 0:
            return
        clock.advance(self.pool.monitor, timedelta(microseconds=delta))
        if self.caps.advance_clock is not None:
            self.caps.advance_clock(self.pool.monitor, timedelta(microseconds=delta))
        for w in self.core.workers:
            if w.waiting is not None:  # a call in flight: blocked, or paused at its gate
                for h in w.granted:
                    assert h.grant is not None
                    if self.core.now < h.grant.lease_end <= target:
                        self.core.saw("lease ran out while its call waited")
        self.core.now = target

    # ------------------------------------------------------------------- calls

    def beat(self, w: Worker, h: Held) -> None:
        h.next_beat = self.core.now + BEAT
        self._after_own_completion(h)
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
                self.judge.answer("heartbeat", h.grant, read.yes, at, self.core.now, read.raised)

        self.timeouts.send(
            w, "heartbeat", h, lambda c: self.queue.heartbeat(c, h.raw, lease), done, beat=True
        )

    def claim(self, w: Worker) -> None:
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            raw = answers.claim(self.queue.name, outcome)
            if raw is None:
                self._nothing(w, "claim", outcome, at)
                return
            self._granted(w, raw, at)

        self.timeouts.send(
            w, "claim", None, lambda c: self.queue.claim(c, w.queue_name, lease), done
        )

    def _nothing(self, w: Worker, call: str, outcome: Outcome, at: int) -> None:
        """Tell the story of a claim that handed out nothing; an exception is noted for the
        judge, whose no-lost-jobs story quotes it if a job is never handed out again."""
        if isinstance(outcome, Raised):
            self.judge.raised(call, at, outcome.quote)
            self.core.say(f"t={seconds(at)} {w.name} {call}: nothing, it raised {outcome.quote}")
        else:
            self.core.say(f"t={seconds(at)} {w.name} {call}: nothing")

    def _granted(self, w: Worker, result: Any, at: int) -> None:
        """Take a claim the queue handed `w` at `at`; the oracle judges it once it commits."""
        claim = answers.checked(self.queue.name, "claim", result)
        began = self.core.instant(w, at)  # the lease it wrote starts at its now()
        label = f"{w.name}:{self.core.job_label(claim)}#{claim.token!r}"
        held = Held(claim=claim, label=label, raw=result)
        w.held.append(held)
        key = self.queue.effect_key(result)
        answered = self.history.events[-1].seq  # the line that recorded this answer
        # the call, if it was in flight: other grants came meanwhile
        sent = self.core.scheduler.answering
        answered_at = self.core.now if sent is not None else None  # it took the job by then

        def grant() -> None:
            held.grant = self.judge.grant(
                claim, label, at, key, answered, sent, answered_at, lease_from=began
            )
            if w.beat is not None and not w.crashed:
                held.next_beat = self.core.now + BEAT

        self.core.apply(w, grant)
        self.core.say(
            f"t={seconds(at)} {w.name} claims {self.core.job_label(claim)} "
            f"(token {claim.token!r}, lease until {seconds(began + LEASE)})"
        )

    def batch_claims(self) -> bool:
        """Whether a worker may claim several jobs in one call (`claim_many`): the jobs
        are then completed one at a time unless the queue completes in batches too."""
        return self.caps.claim_many is not None and not self.caps.one_claim_per_worker

    def batches(self) -> bool:
        """Whether the queue claims and completes in batches (`complete_many` too)."""
        return self.batch_claims() and self.caps.complete_many is not None

    def owns(self, h: Held) -> bool:
        """Return whether the judge holds `h`'s grant to be its job's owner now."""
        if h.grant is None:
            return False
        return self.oracle.owner(self.oracle.job(h.claim)) is h.grant

    def claim_many(self, w: Worker, size: int) -> None:
        claim_many = self.caps.claim_many
        assert claim_many is not None
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            raws = answers.claims(self.queue.name, outcome)
            if not raws:
                self._nothing(w, "claim_many", outcome, at)
            for raw in raws:
                self._granted(w, raw, at)

        self.timeouts.send(
            w, "claim_many", None, lambda c: claim_many(c, w.queue_name, lease, size), done
        )

    def complete_many(self, w: Worker, batch: list[Held]) -> None:
        complete_many = self.caps.complete_many
        assert complete_many is not None
        owners = {self.owns(h) for h in batch}
        if owners == {True, False}:
            self.core.saw("batch of stale and fresh claims")
        for h in batch:
            h.completion_sent = True
        record = clock.QUERIES["record_effect"].text
        # Each claim's call by its place in the batch, never by id(): the explorer's
        # state takes in what this closure captures, and an address differs every run.
        calls = [next(self.core.call_ids) for _ in batch]
        rows = [
            {
                "call_id": call_id,
                "job": str(h.claim.job_id),
                "token": repr(h.claim.token),
                "worker": h.label,
            }
            for h, call_id in zip(batch, calls, strict=True)
        ]

        def recorded_effect(conn: Connection[Any], raw: Any) -> None:
            place = next(i for i, h in enumerate(batch) if h.raw is raw)
            conn.execute(record, rows[place])

        effect: BatchEffect = recorded_effect
        if not self.caps.transactional_effects:
            for h in batch:
                self.send_effect(w, h)
            effect = _no_batch_effect

        def done(outcome: Outcome, at: int) -> None:
            for h in batch:
                if h in w.held:
                    w.held.remove(h)
            self.core.db_dirty = True
            reads = answers.answers(self.queue.name, outcome, len(batch))
            for h, read, call_id in zip(batch, reads, calls, strict=True):
                self.core.completions[call_id] = (h, read.yes if read.judged else None)
                if not read.judged:  # the connection died under it, or the harness ended it
                    self.core.release_lost(w, "complete", h, at)
                    continue
                if w.txn is not None:
                    w.txn_calls.append(call_id)
                self.core.say(
                    f"t={seconds(at)} {w.name} completes {h.label} in a batch: {_said(read)}"
                )
                self.core.apply(w, partial(self._judge_complete, h, read, at, self.core.now))

        self.timeouts.send(
            w,
            "complete_many",
            None,
            lambda c: complete_many(c, [h.raw for h in batch], effect),
            done,
            releases=batch,
        )

    def _after_own_completion(self, h: Held) -> None:
        """Count a heartbeat of a claim whose own worker already sent its completion: the
        heartbeat thread beats on while the completion is in flight (paused between its
        statements, or blocked). Sent before that completion commits, the beat is the
        owner's (owner-progress: neither it nor the completion may be refused for it);
        after, it is stale (fencing), and one that writes `running` back revives a
        finished job (no-lost-jobs)."""
        if h.completion_sent:
            self.core.saw("heartbeat after its own worker's completion")

    def heartbeat(self, w: Worker, h: Held) -> None:
        lease = timedelta(microseconds=LEASE)
        self._after_own_completion(h)

        def done(outcome: Outcome, at: int) -> None:
            if not self.caps.heartbeat_answers and isinstance(outcome, Answered):
                self.core.say(f"t={seconds(at)} {w.name} heartbeats {h.label}: it answers nothing")
                return
            read = answers.yes_no(self.queue.name, "heartbeat", outcome)
            if not read.judged:
                return
            if not read.yes:
                h.believed = False
            said = "extended" if read.yes else _said(read)
            self.core.say(f"t={seconds(at)} {w.name} heartbeats {h.label}: {said}")
            answered, began = self.core.now, self.core.instant(w, at)
            self.core.apply(w, lambda: self._judge(h, "heartbeat", read, at, answered, began))

        self.timeouts.send(w, "heartbeat", h, lambda c: self.queue.heartbeat(c, h.raw, lease), done)

    def _judge(
        self,
        h: Held,
        op: str,
        read: answers.YesNo,
        at: int,
        answered: int,
        lease_from: int | None = None,
    ) -> None:
        """Hand one judged answer of `h`'s grant to the judge, through the lock timeouts
        (a refusal one of them gave waits for what held the lock); `lease_from`: the
        instant a heartbeat's now() read."""
        self.timeouts.judge(h, op, read, at, answered, lease_from)

    def complete(self, w: Worker, h: Held) -> None:
        call_id = next(self.core.call_ids)
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
            self.send_effect(w, h)
            effect = _no_effect

        def done(outcome: Outcome, at: int) -> None:
            if h in w.held:
                w.held.remove(h)
            self.core.db_dirty = True
            read = answers.yes_no(self.queue.name, "complete", outcome)
            self.core.completions[call_id] = (h, read.yes if read.judged else None)
            if not read.judged:  # the connection died under it, or the harness ended it
                self.core.release_lost(w, "complete", h, at)
                return
            if w.txn is not None:
                w.txn_calls.append(call_id)
            self.core.say(f"t={seconds(at)} {w.name} completes {h.label}: {_said(read)}")
            answered = self.core.now
            self.core.apply(w, lambda: self._judge(h, "complete", read, at, answered))

        h.completion_sent = True
        complete = self.queue.complete
        self.timeouts.send(
            w, "complete", h, lambda c: complete(c, h.raw, effect), done, releases=[h]
        )

    def _judge_complete(self, h: Held, read: answers.YesNo, at: int, answered: int) -> None:
        self._judge(h, "complete", read, at, answered)

    def send_effect(self, w: Worker, h: Held) -> None:
        if h.grant is None:
            self.judge.effect_held_back(h.claim.job_id)
            said = f"holds back the effect of uncommitted {h.label}"
            self.core.say(f"t={seconds(self.core.now)} {w.name} {said}")
            return
        key = self.queue.effect_key(h.raw)
        taken = self.judge.external_effect(h.grant, key)
        self.history.add(
            self.core.now,
            w.name,
            "send",
            "ok",
            job=self.core.job_label(h.claim),
            token=repr(h.claim.token),
            value={"key": key, "accepted": taken},
        )
        self.core.say(
            f"t={seconds(self.core.now)} {w.name} sends the receipt of {h.label} "
            f"with key {key!r}: {'accepted' if taken else 'dropped as a duplicate'}"
        )

    def fail(self, w: Worker, h: Held) -> None:
        if self.core.last_attempt(h):
            # The report that gives the job up for good: `failed` now, or a job lost if
            # the queue gives it back with no attempt left (or loses it in between).
            self.core.saw("failure report on the last attempt")

        def done(outcome: Outcome, at: int) -> None:
            if h in w.held:
                w.held.remove(h)
            read = answers.yes_no(self.queue.name, "fail", outcome)
            if not read.judged:
                self.core.release_lost(w, "fail", h, at)
                return
            self.core.say(f"t={seconds(at)} {w.name} fails {h.label}: {_said(read)}")
            answered = self.core.now
            self.core.apply(w, lambda: self._judge(h, "fail", read, at, answered))

        fail = self.queue.fail
        self.timeouts.send(w, "fail", h, lambda c: fail(c, h.raw, "job raised"), done, releases=[h])

    def maintain(self) -> None:
        """Run the queue's recovery sweep, unless its last sweep is still blocked on a lock."""
        maintain = self.caps.maintain
        assert maintain is not None
        sweeper = self.core.open_sweeper()
        if sweeper.waiting is not None:
            self.core.say(
                f"t={seconds(self.core.now)} the recovery sweep is still blocked: no second one"
            )
            return
        if any(w.txn is not None or w.waiting is not None for w in self.core.workers):
            self.core.saw("sweep raced an open transaction")

        def done(outcome: Outcome, at: int) -> None:
            if isinstance(outcome, Raised):
                self.judge.raised("maintain", at, outcome.quote)
                self.core.say(f"t={seconds(at)} the queue's recovery sweep raised {outcome.quote}")
            elif isinstance(outcome, Answered):
                self.core.say(f"t={seconds(at)} the queue's recovery sweep ran")

        self.timeouts.send(sweeper, "maintain", None, maintain, done)

    def fetch_and_ack(self, w: Worker) -> None:
        """Claim once more, then complete everything `w` holds, newest first, in one batch."""
        if w in self.core.claimers():
            self.claim(w)
        if w.held and w.can_act and self.core.may(w, "complete"):
            self.complete_many(w, w.held[::-1])


def _said(read: answers.YesNo) -> str:
    """Say what a judged yes/no answer was, quoting an exception."""
    if read.yes:
        return "accepted"
    return f"refused, it raised {read.raised}" if read.raised else "rejected"


def _no_effect(conn: Connection[Any]) -> None:
    """The completion's effect when the library runs the task body outside it."""


def _no_batch_effect(conn: Connection[Any], claim: Any) -> None:
    """A batch completion's effect when the library runs the task bodies outside it."""
