"""The Hypothesis state machine: simulated workers racing over leased jobs.

Rules are the things that happen to workers and jobs; each offers only moves that
mean something in the current model (preconditions read the Python model only,
never the database), and picks its worker or claim with a small integer `pick`
into the list of eligible ones, so a failing program prints as plain arguments and
replays exactly. Invariants check every property after every step; teardown heals
every worker, lets each finish what it holds, drains the queue and checks that no
job was lost.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

import psycopg
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from psycopg import Connection

from leasecheck.stateful import actors, answers, clock
from leasecheck.stateful.answers import Answered, Outcome, Raised
from leasecheck.stateful.contract import (
    CALLS,
    STATES,
    BatchEffect,
    Capabilities,
    Claim,
    ContractError,
    JobId,
    Queue,
    capabilities,
)
from leasecheck.stateful.history import History
from leasecheck.stateful.judge import Judge, Rules
from leasecheck.stateful.moves import BATCH, PICK, STALL, TAKE, Stall, Take
from leasecheck.stateful.program import Step, recorded
from leasecheck.stateful.properties import PropertyViolated, Violation
from leasecheck.stateful.recorder import Failure, Recorder
from leasecheck.stateful.scheduler import Scheduler, note
from leasecheck.stateful.scheduler import plain as _plain
from leasecheck.stateful.timeline import render
from leasecheck.stateful.units import BEAT, LEASE, SECOND
from leasecheck.stateful.workers import Held, Worker

MAX_JOBS = 3

_ERRORS: dict[str, type[PropertyViolated]] = {}


def violation_error(prop: str) -> type[PropertyViolated]:
    """Return the exception class for one property (distinct classes shrink separately)."""
    if prop not in _ERRORS:
        name = "".join(part.title() for part in prop.split("-")) + "Violated"
        _ERRORS[prop] = type(name, (PropertyViolated,), {"__module__": __name__})
    return _ERRORS[prop]


@dataclass
class Harness:
    """Everything an example needs that outlives it: the queue, connections, records."""

    queue: Queue
    pool: actors.Pool
    recorder: Recorder = field(default_factory=Recorder)
    excused: frozenset[str] = frozenset()
    """Properties not judged (`--leasecheck-excuse`): the matrix uses it to find the next one."""
    spec: str = ""
    """How the queue was named (`module:attr`), saved with a failure so it can be replayed."""

    @property
    def caps(self) -> Capabilities:
        return capabilities(self.queue)

    def reset(self) -> None:
        """Empty the queue and the harness tables between examples, on a clean monitor."""
        actors.clean(self.pool.monitor)
        self.queue.reset(self.pool.monitor)
        clock.reset(self.pool.monitor)


def _seconds(us: int) -> str:
    return f"{us / SECOND:g}s"


class LeaseMachine(Scheduler, RuleBasedStateMachine):
    """Workers claim, heartbeat, pause, crash and complete; the oracle judges every answer."""

    def __init__(self, harness: Harness) -> None:
        super().__init__()
        self.h = harness
        self.queue = harness.queue
        self.caps = harness.caps
        self.pool = harness.pool
        self.now = 0
        self.history = History()
        rules = Rules(
            lease=LEASE,
            max_attempts=self.queue.max_attempts,
            ordered_tokens=self.caps.ordered_tokens,
            revokes_expired=self.caps.revokes_expired,
            answers_complete=not self.caps.transactional_effects,
            observes=self.caps.state is not None,
        )
        self.judge = Judge(rules, observe=self._observe)
        """Every answer goes to the judge, which writes it down as a fact and judges it."""
        self.oracle = self.judge.oracle
        """What the judge concluded so far; read here, never written."""
        self.sweeper: Worker | None = None
        """The queue's own recovery (`maintain`), on a connection of its own."""
        self.said = 0
        self.workers: list[Worker] = []
        self.jobs: list[str] = []
        self.calls = itertools.count(1)
        self.completions: dict[int, tuple[Held, bool | None]] = {}
        """call id -> the claim and the queue's answer (None: the connection died under it)."""
        self.voided: set[int] = set()
        self.db_dirty = False
        self.broken = False
        self.generation = itertools.count(2)
        self.program: list[Step] = []
        self.cancelled: set[int] = set()
        """ids of sessions whose running call the harness cancelled (the error is its doing)."""

    # ----------------------------------------------------------------- plumbing

    @contextmanager
    def _step(self) -> Iterator[None]:
        """Mark the example broken if a step raises, so teardown does not judge it."""
        self.broken = True
        yield
        self._settle()
        self.broken = False

    def _new_worker(self, name: str) -> Worker:
        beat = self.pool.open(f"{name}/beat") if self.caps.heartbeats else None
        return Worker(name=name, main=self.pool.open(name), beat=beat)

    def _observe(self, job_id: JobId) -> str:
        """Read the job's status from the queue's own tables (its `state`), as committed."""
        assert self.caps.state is not None
        try:
            status = self.caps.state(self.pool.monitor, job_id)
        except Exception as exc:
            raise ContractError(
                f"{self.queue.name}: state() raised {answers.Raised(exc).quote} for job "
                f"{job_id!r}; it must read the job's status and answer one of {', '.join(STATES)}"
            ) from None
        if status not in STATES:
            raise ContractError(
                f"{self.queue.name}: state() answered {status!r} for job {job_id!r}; "
                f"answer one of {', '.join(STATES)}"
            )
        return status

    def _job_label(self, claim: Claim) -> str:
        job = self.oracle.jobs.get(claim.job_id)
        return job.label if job else f"job?{claim.job_id}"

    def _apply(self, w: Worker, update: Callable[[], None]) -> None:
        """Apply an oracle update now, or at commit when the worker holds a transaction."""
        if w.txn is None:
            update()
        else:
            w.txn.append(update)

    def _set_clock(self, target: int) -> None:
        delta = target - self.now
        if delta <= 0:
            return
        clock.advance(self.pool.monitor, timedelta(microseconds=delta))
        if self.caps.advance_clock is not None:
            self.caps.advance_clock(self.pool.monitor, timedelta(microseconds=delta))
        self.now = target

    def _advance(self, target: int) -> None:
        """Move time to `target`, firing running workers' heartbeats when they fall due."""
        while True:
            due = [
                (h.next_beat, i, w, h)
                for i, w in enumerate(self.workers)
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
                    self._beat(w, h)
        self._set_clock(target)

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

    def _end_txn(self, w: Worker, *, commit: bool, why: str = "") -> None:
        updates, calls = w.txn or [], w.txn_calls
        w.txn, w.txn_calls = None, []
        if commit:
            for update in updates:
                update()
            for h in w.granted:
                if h.next_beat is None and h.believed and w.beat is not None:
                    h.next_beat = self.now + BEAT
        else:
            w.held = [h for h in w.snapshot if h.grant is not None]
            self.voided.update(calls)
            self.history.add(self.now, w.name, "rollback", "event", note=why)
        w.snapshot = []
        self.db_dirty = True

    def _replace(self, w: Worker, why: str) -> None:
        """Crash `w`: end both backends; a fresh worker with a new name takes its place.

        Backends with a call in flight go first: ending the main connection first
        would roll back its transaction and let a heartbeat blocked behind it run,
        racing its own termination. A heartbeat connection the worker never sent a
        call on holds nothing and the queue never saw it, so it goes back to the pool
        alive: starting backends was half of the server's CPU in `bench.step_cost`.
        """
        sessions = [s for s in (w.main, w.beat) if s is not None and (s is w.main or s.used)]
        for session in sorted(sessions, key=lambda s: s.pending is None):
            self.pool.terminate(session)
        self._settle()
        if w.txn is not None:
            self._end_txn(w, commit=False, why=why)
        w.crashed = True
        for done in (w.main, w.beat):
            if done is not None:
                self.pool.release(done)
        base = w.name.split(".")[0]
        fresh = self._new_worker(f"{base}.{next(self.generation)}")
        self.workers[self.workers.index(w)] = fresh
        self.history.add(self.now, w.name, "crash", "event", note=f"{why}; {fresh.name} starts")

    def _may(self, w: Worker, call: str) -> bool:
        """Return whether `w` may make `call` now: outside a held transaction, or one the
        queue lets that call run in."""
        return w.txn is None or call in self.caps.held_calls or call not in CALLS

    def _pairs(self, call: str) -> list[tuple[Worker, Held]]:
        return [(w, h) for w in self.workers if w.can_act and self._may(w, call) for h in w.held]

    def _pick_pair(self, pick: int, call: str) -> tuple[Worker, Held]:
        pairs = self._pairs(call)
        return pairs[pick % len(pairs)]

    def _claimers(self) -> list[Worker]:
        """Return the workers that may claim now (one job at a time, if the queue says so)."""
        return [
            w
            for w in self.workers
            if w.can_act
            and self._may(w, "claim")
            and not (self.caps.one_claim_per_worker and w.held)
        ]

    def _pick(self, workers: list[Worker], pick: int) -> Worker:
        return workers[pick % len(workers)]

    def _lease_ends(self) -> list[int]:
        return sorted(
            g.lease_end
            for job in self.oracle.jobs.values()
            for g in job.grants
            if not g.released and not job.finished and g.lease_end > self.now
        )

    # -------------------------------------------------------------------- rules

    @initialize(workers=st.integers(min_value=2, max_value=5))
    @recorded
    def start(self, workers: int) -> None:
        """Start the workers and enqueue the first job (an example without one is wasted)."""
        with self._step():
            self.workers = [self._new_worker(f"w{i}") for i in range(workers)]
            self._enqueue()

    def _enqueue(self) -> None:
        label = f"job{len(self.jobs) + 1}"
        self.history.add(self.now, "producer", "enqueue", "invoke", job=label)
        job_id = self.queue.enqueue(self.pool.monitor, {"n": len(self.jobs) + 1, "kind": "receipt"})
        self.judge.enqueued(job_id, label)
        self.jobs.append(label)
        self.history.add(self.now, "producer", "enqueue", "ok", job=label, value=_plain(job_id))
        note(f"t={_seconds(self.now)} enqueue {label}")
        # One microsecond per job, so no two jobs share a timestamp (an order by time
        # never rests on a tie-break the queue leaves to chance), and no claim shares
        # its job's instant (a queue may hand out only jobs due strictly before now).
        self._advance(self.now + 1)

    @precondition(lambda self: len(self.jobs) < MAX_JOBS)
    @rule(jobs=st.integers(min_value=1, max_value=MAX_JOBS - 1))
    @recorded
    def enqueue(self, jobs: int) -> None:
        """The producer adds jobs (never more than MAX_JOBS in one example).

        It takes an argument only so that it sorts after `asleep` and `claim`: see
        `stateful.moves`.
        """
        with self._step():
            for _ in range(min(jobs, MAX_JOBS - len(self.jobs))):
                self._enqueue()

    @precondition(
        lambda self: (
            bool(self._claimers()) and any(not j.finished for j in self.oracle.jobs.values())
        )
    )
    @rule(how=TAKE)
    @recorded
    def claim(self, how: Take) -> None:
        """A worker claims the next job; with `held`, inside a transaction it keeps open."""
        with self._step():
            w = self._pick(self._claimers(), how.worker)
            if how.held and w.txn is None and "claim" in self.caps.held_calls:
                self._begin(w)
            self._claim(w)

    def _claim(self, w: Worker) -> None:
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            raw = answers.claim(self.queue.name, outcome)
            if raw is None:
                self._nothing(w, "claim", outcome, at)
                return
            self._granted(w, raw, at)

        self._call(w, "claim", None, lambda c: self.queue.claim(c, w.name, lease), done)

    def _nothing(self, w: Worker, call: str, outcome: Outcome, at: int) -> None:
        """Tell the story of a claim that handed out nothing; an exception is noted for the
        judge, whose no-lost-jobs story quotes it if a job is never handed out again."""
        if isinstance(outcome, Raised):
            self.judge.raised(call, at, outcome.quote)
            note(f"t={_seconds(at)} {w.name} {call}: nothing, it raised {outcome.quote}")
        else:
            note(f"t={_seconds(at)} {w.name} {call}: nothing")

    def _granted(self, w: Worker, result: Any, at: int) -> None:
        """Take a claim the queue handed `w` at `at`; the oracle judges it once it commits."""
        claim = answers.checked(self.queue.name, "claim", result)
        label = f"{w.name}:{self._job_label(claim)}#{claim.token!r}"
        held = Held(claim=claim, label=label, raw=result)
        w.held.append(held)
        key = self.queue.effect_key(result)
        answered = self.history.events[-1].seq  # the line that recorded this answer

        def grant() -> None:
            held.grant = self.judge.grant(claim, label, at, key, answered)
            if w.beat is not None and not w.crashed:
                held.next_beat = self.now + BEAT

        self._apply(w, grant)
        note(
            f"t={_seconds(at)} {w.name} claims {self._job_label(claim)} "
            f"(token {claim.token!r}, lease until {_seconds(at + LEASE)})"
        )

    def _batches(self) -> bool:
        caps = self.caps
        return (
            caps.claim_many is not None
            and caps.complete_many is not None
            and not caps.one_claim_per_worker
        )

    @precondition(
        lambda self: (
            self._batches()
            and bool(self._claimers())
            and any(not j.finished for j in self.oracle.jobs.values())
        )
    )
    @rule(pick=PICK, size=BATCH)
    @recorded
    def claim_batch(self, pick: int, size: int) -> None:
        """A worker claims up to `size` jobs in one call (`claim_many`)."""
        with self._step():
            w = self._pick(self._claimers(), pick)
            claim_many = self.caps.claim_many
            assert claim_many is not None
            lease = timedelta(microseconds=LEASE)

            def done(outcome: Outcome, at: int) -> None:
                raws = answers.claims(self.queue.name, outcome)
                if not raws:
                    self._nothing(w, "claim_many", outcome, at)
                for raw in raws:
                    self._granted(w, raw, at)

            self._call(w, "claim_many", None, lambda c: claim_many(c, w.name, lease, size), done)

    @precondition(lambda self: self._batches() and bool(self._pairs("complete")))
    @rule(pick=PICK, size=BATCH)
    @recorded
    def complete_batch(self, pick: int, size: int) -> None:
        """A worker completes up to `size` of the jobs it holds, newest first, in one call
        (`complete_many`), stale claims and all: a fresh claim leads, a stale one follows."""
        with self._step():
            holders = [w for w in self.workers if w.can_act and self._may(w, "complete") and w.held]
            w = self._pick(holders, pick)
            self._complete_many(w, w.held[::-1][:size])

    def _complete_many(self, w: Worker, batch: list[Held]) -> None:
        complete_many = self.caps.complete_many
        assert complete_many is not None
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
                if not read.judged:
                    continue  # the connection died under it, or the harness ended it
                if w.txn is not None:
                    w.txn_calls.append(call_id)
                note(f"t={_seconds(at)} {w.name} completes {h.label} in a batch: {_said(read)}")
                self._apply(w, partial(self._judge_complete, h, read, at, self.now))

        self._call(
            w,
            "complete_many",
            None,
            lambda c: complete_many(c, [h.raw for h in batch], effect),
            done,
        )

    @precondition(lambda self: bool(self._pairs("heartbeat")) and self.caps.heartbeats)
    @rule(pick=PICK)
    @recorded
    def heartbeat(self, pick: int) -> None:
        """An explicit heartbeat on the main connection (inside the held transaction, if any)."""
        with self._step():
            self._heartbeat(*self._pick_pair(pick, "heartbeat"))

    def _heartbeat(self, w: Worker, h: Held) -> None:
        lease = timedelta(microseconds=LEASE)

        def done(outcome: Outcome, at: int) -> None:
            if not self.caps.heartbeat_answers and isinstance(outcome, Answered):
                note(f"t={_seconds(at)} {w.name} heartbeats {h.label}: it answers nothing")
                return
            read = answers.yes_no(self.queue.name, "heartbeat", outcome)
            if not read.judged:
                return
            if not read.yes:
                h.believed = False
            said = "extended" if read.yes else _said(read)
            note(f"t={_seconds(at)} {w.name} heartbeats {h.label}: {said}")
            answered = self.now
            self._apply(w, lambda: self._judge(h, "heartbeat", read, at, answered))

        self._call(w, "heartbeat", h, lambda c: self.queue.heartbeat(c, h.raw, lease), done)

    def _judge(self, h: Held, op: str, read: answers.YesNo, at: int, answered: int) -> None:
        """Hand one judged answer of `h`'s grant to the judge (a claim never committed has
        no grant: nothing to judge)."""
        if h.grant is not None:
            self.judge.answer(op, h.grant, read.yes, at, answered, read.raised)

    @precondition(lambda self: bool(self._pairs("complete")))
    @rule(pick=PICK)
    @recorded
    def complete(self, pick: int) -> None:
        """A worker finishes a job it holds, whether or not its lease is still good."""
        with self._step():
            w, h = self._pick_pair(pick, "complete")
            self._complete(w, h)

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
            if not read.judged:
                return  # the connection died under it (outcome unknown), or the harness ended it
            if w.txn is not None:
                w.txn_calls.append(call_id)
            note(f"t={_seconds(at)} {w.name} completes {h.label}: {_said(read)}")
            answered = self.now
            self._apply(w, lambda: self._judge(h, "complete", read, at, answered))

        self._call(w, "complete", h, lambda c: self.queue.complete(c, h.raw, effect), done)

    def _judge_complete(self, h: Held, read: answers.YesNo, at: int, answered: int) -> None:
        self._judge(h, "complete", read, at, answered)

    @precondition(lambda self: bool(self._pairs("send")))
    @rule(pick=PICK)
    @recorded
    def send_effect(self, pick: int) -> None:
        """A worker sends the job's external effect (a receipt) keyed by effect_key."""
        with self._step():
            self._send(*self._pick_pair(pick, "send"))

    def _send(self, w: Worker, h: Held) -> None:
        if h.grant is None:
            note(f"t={_seconds(self.now)} {w.name} holds back the effect of uncommitted {h.label}")
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
        note(
            f"t={_seconds(self.now)} {w.name} sends the receipt of {h.label} "
            f"with key {key!r}: {'accepted' if taken else 'dropped as a duplicate'}"
        )

    @precondition(lambda self: bool(self._pairs("fail")))
    @rule(pick=PICK)
    @recorded
    def fail(self, pick: int) -> None:
        """A worker reports that a job it holds failed (retry, or give up at the cap)."""
        with self._step():
            self._fail(*self._pick_pair(pick, "fail"))

    def _fail(self, w: Worker, h: Held) -> None:
        def done(outcome: Outcome, at: int) -> None:
            if h in w.held:
                w.held.remove(h)
            read = answers.yes_no(self.queue.name, "fail", outcome)
            if not read.judged:
                return
            note(f"t={_seconds(at)} {w.name} fails {h.label}: {_said(read)}")
            answered = self.now
            self._apply(w, lambda: self._judge(h, "fail", read, at, answered))

        self._call(w, "fail", h, lambda c: self.queue.fail(c, h.raw, "job raised"), done)

    @precondition(lambda self: any(not w.paused for w in self.workers))
    @rule(pick=PICK)
    @recorded
    def pause(self, pick: int) -> None:
        """SIGSTOP: the worker takes no steps and sends no heartbeats until resumed."""
        with self._step():
            w = self._pick([w for w in self.workers if not w.paused], pick)
            w.paused = True
            self.history.add(self.now, w.name, "pause", "event")
            note(f"t={_seconds(self.now)} {w.name} pauses")

    @precondition(lambda self: any(w.paused for w in self.workers))
    @rule(pick=PICK)
    @recorded
    def resume(self, pick: int) -> None:
        with self._step():
            self._resume(self._pick([w for w in self.workers if w.paused], pick))

    def _resume(self, w: Worker) -> None:
        # Its overdue heartbeats fire at the next tick of the clock, not before the
        # worker's own next step: a woken worker may well complete before it learns
        # that its lease ran out.
        w.paused = False
        self.history.add(self.now, w.name, "resume", "event")
        note(f"t={_seconds(self.now)} {w.name} resumes")

    @precondition(lambda self: any(not w.paused and w.granted for w in self.workers))
    @rule(how=STALL)
    @recorded
    def asleep(self, how: Stall) -> None:
        """The story's pause in one step: a worker sleeps past the end of its lease, then wakes.

        Unless it sleeps `alone`, the first other worker that can act claims meanwhile.
        `then` is what the woken worker does first with the job it was working on,
        not knowing whether it still owns it: complete, fail, heartbeat or nothing; or,
        for a queue with batches, `batch`: a batch worker's loop, which fetches once
        more and then acknowledges everything it holds in one batch.
        (Named to sort first among the rules: see `stateful.moves`.)
        """
        with self._step():
            w = self._pick([w for w in self.workers if not w.paused and w.granted], how.worker)
            w.paused = True
            work = max(w.granted, key=lambda h: h.grant.lease_end if h.grant else 0)
            end = work.grant.lease_end if work.grant else self.now
            note(f"t={_seconds(self.now)} {w.name} stalls past {_seconds(end)}")
            self.history.add(self.now, w.name, "pause", "event", note="stall")
            self._advance(max(end + 1, self.now + 1))
            others = [o for o in self._claimers() if o is not w]
            if not how.alone and others:
                if self.caps.maintain is not None:
                    self._maintain()  # the queue's recovery runs while the worker sleeps
                self._claim(others[0])
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

    def _fetch_and_ack(self, w: Worker) -> None:
        """Claim once more, then complete everything `w` holds, newest first, in one batch."""
        if w in self._claimers():
            self._claim(w)
        if w.held and w.can_act and self._may(w, "complete"):
            self._complete_many(w, w.held[::-1])

    def _busy(self) -> list[Worker]:
        """Return workers whose crash or cut would change something: they hold work."""
        return [w for w in self.workers if w.held or w.txn is not None or w.waiting is not None]

    @precondition(lambda self: bool(self._busy()))
    @rule(pick=PICK)
    @recorded
    def crash(self, pick: int) -> None:
        """The worker's process dies: its connections close, mid-transaction or not."""
        with self._step():
            w = self._pick(self._busy(), pick)
            note(f"t={_seconds(self.now)} {w.name} crashes")
            self._replace(w, "crashed")

    @precondition(lambda self: any(w.txn is not None or w.waiting for w in self.workers))
    @rule(pick=PICK)
    @recorded
    def cut(self, pick: int) -> None:
        """The server ends the worker's backend; the worker reconnects and keeps its claims."""
        with self._step():
            w = self._pick([w for w in self.workers if w.txn is not None or w.waiting], pick)
            note(f"t={_seconds(self.now)} {w.name}'s connection is cut")
            self.pool.terminate(w.main)
            self._settle()
            if w.txn is not None:
                self._end_txn(w, commit=False, why="connection cut")
            old = w.main
            w.main = self.pool.open(w.name)
            self.pool.release(old)
            self.history.add(self.now, w.name, "cut", "event", note="backend terminated")

    @precondition(
        lambda self: (
            self.caps.maintain is not None
            and (self.sweeper is None or self.sweeper.waiting is None)
        )
    )
    @rule(after=st.sampled_from(["now", "past-lease-end"]))
    @recorded
    def sweep(self, after: str) -> None:
        """The queue's own recovery (`maintain`) runs on a connection of its own, now or
        just after the next lease ends; it may block behind a worker's open transaction."""
        with self._step():
            ends = self._lease_ends()
            if after == "past-lease-end" and ends:
                self.history.add(self.now, "clock", "advance", "event", value=_seconds(ends[0] + 1))
                self._advance(ends[0] + 1)
            self._maintain()

    def _sweeper(self) -> Worker:
        if self.sweeper is None:
            self.sweeper = Worker(name="sweeper", main=self.pool.open("sweeper"), beat=None)
        return self.sweeper

    def _maintain(self) -> None:
        """Run the queue's recovery sweep, unless its last sweep is still blocked on a lock."""
        maintain = self.caps.maintain
        assert maintain is not None
        sweeper = self._sweeper()
        if sweeper.waiting is not None:
            note(f"t={_seconds(self.now)} the recovery sweep is still blocked: no second one")
            return

        def done(outcome: Outcome, at: int) -> None:
            if isinstance(outcome, Raised):
                self.judge.raised("maintain", at, outcome.quote)
                note(f"t={_seconds(at)} the queue's recovery sweep raised {outcome.quote}")
            elif isinstance(outcome, Answered):
                note(f"t={_seconds(at)} the queue's recovery sweep ran")

        self._call(sweeper, "maintain", None, maintain, done)

    @rule(to=st.sampled_from(["lease-end", "past-lease-end", "beat", "second"]))
    @recorded
    def time_passes(self, to: str) -> None:
        """Let time pass; running workers' heartbeats fire on schedule meanwhile."""
        with self._step():
            ends = self._lease_ends()
            why = to
            if to in ("lease-end", "past-lease-end") and ends:
                target = ends[0] + (1 if to == "past-lease-end" else 0)
            else:
                target = self.now + (BEAT if to == "beat" else SECOND)
                if to in ("lease-end", "past-lease-end"):
                    why = f"{to}: no lease ends ahead, so 1 s"
            self.history.add(self.now, "clock", "advance", "event", value=_seconds(target))
            note(f"t={_seconds(self.now)} clock advances to {_seconds(target)} ({why})")
            self._advance(target)

    @precondition(
        lambda self: (
            bool(self.caps.held_calls) and any(w.can_act and w.txn is None for w in self.workers)
        )
    )
    @rule(pick=PICK)
    @recorded
    def open_transaction(self, pick: int) -> None:
        """Open a transaction the worker's next calls run inside, held across steps."""
        with self._step():
            self._begin(self._pick([w for w in self.workers if w.can_act and w.txn is None], pick))

    def _begin(self, w: Worker) -> None:
        w.main.conn.execute("begin")
        w.txn, w.snapshot = [], list(w.held)
        self.history.add(self.now, w.name, "begin", "event")
        note(f"t={_seconds(self.now)} {w.name} begins a transaction")

    @precondition(lambda self: any(w.can_act and w.txn is not None for w in self.workers))
    @rule(pick=PICK, commit=st.booleans())
    @recorded
    def close_transaction(self, pick: int, commit: bool) -> None:
        """Commit or roll back a held transaction; calls blocked behind it go on."""
        with self._step():
            w = self._pick([w for w in self.workers if w.can_act and w.txn is not None], pick)
            note(f"t={_seconds(self.now)} {w.name} {'commits' if commit else 'rolls back'}")
            w.main.conn.execute("commit" if commit else "rollback")
            if commit:
                self.history.add(self.now, w.name, "commit", "event")
            self._end_txn(w, commit=commit, why="rolled back by the worker")

    # --------------------------------------------------------------- invariants

    def _refresh(self) -> None:
        """Read the ground truth (effect rows) when a step may have changed it."""
        if not self.db_dirty:
            return
        self.db_dirty = False
        rows = self.pool.monitor.execute(clock.QUERIES["effects"].text).fetchall()
        refused = {call for call, (_, said) in self.completions.items() if said is False}
        self.judge.effect_rows(rows, refused, self.voided)

    def _check(self) -> None:
        """Raise the first violation found: later ones in the same step are often its echo."""
        self._refresh()
        said = [*self.oracle.declared, *self.oracle.unjudged]
        for line in said[self.said :]:
            note(f"  not judged: {line}")
        self.said = len(said)
        for violation in self.oracle.violations:
            self._raise(violation)

    def _raise(self, violation: Violation) -> None:
        """Fail the example on `violation`, unless its property is excused."""
        if violation.prop in self.h.excused:
            return
        self.broken = True
        timeline = render(self.history, SECOND)
        self.h.recorder.last[violation.prop] = Failure(
            violation, tuple(self.program), self.history, timeline, self.judge.to_json()
        )
        raise violation_error(violation.prop)(violation, timeline)

    @invariant()
    def every_property_holds(self) -> None:
        """single-completion, unique-effects, atomic-rejection, exclusive-lease, fencing,
        retry-cap, owner-progress and no-lost-jobs, from the database and the history."""
        self._check()

    # ----------------------------------------------------------------- teardown

    def teardown(self) -> None:
        try:
            if not self.broken and self.workers:
                self._heal_and_drain()
        finally:
            self._clean_up()

    def _heal_and_drain(self) -> None:
        note(f"t={_seconds(self.now)} teardown: heal every worker, finish held work, drain")
        for w in self.workers:
            if w.paused:
                self._resume(w)
        for w in self.workers:  # workers finish their transactions; blocked calls go on
            if w.txn is not None and w.waiting is None:
                failed = w.main.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
                w.main.conn.execute("rollback" if failed else "commit")
                self.history.add(self.now, w.name, "rollback" if failed else "commit", "event")
                self._end_txn(w, commit=not failed, why="teardown")
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
        for v in self.oracle.deferred:
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
                    self.now, "clock", "advance", "event", value=_seconds(self.now + wait)
                )
                note(f"t={_seconds(self.now)} drain: a job is still pending; the clock moves on")
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
            held.grant = self.judge.grant(claim, label, at, key, answered)
            w.held.append(held)

        return done

    def _clean_up(self) -> None:
        for w in [*self.workers, *([self.sweeper] if self.sweeper else [])]:
            for session in (w.main, w.beat):
                if session is not None and not w.crashed:
                    self.pool.release(session)
        self.workers = []
        self.sweeper = None
        self.h.reset()


def _said(read: answers.YesNo) -> str:
    """Say what a judged yes/no answer was, quoting an exception."""
    if read.yes:
        return "accepted"
    return f"refused, it raised {read.raised}" if read.raised else "rejected"


def _no_effect(conn: Connection[Any]) -> None:
    """The completion's effect when the library runs the task body outside it."""


def _no_batch_effect(conn: Connection[Any], claim: Any) -> None:
    """A batch completion's effect when the library runs the task bodies outside it."""
