"""The driver's core: workers, simulated time, transactions, faults and the judge's verdict.

It knows nothing of Hypothesis. It holds what the harness believes about each worker
and job (plain Python, never read back from the database except through the
queue's own `state`), the scheduler the calls are sent through (it is the scheduler's
`Host`), opens and ends transactions held across steps, crashes and cuts workers,
picks whom a move falls on, and turns the judge's violations into the exception of
their property. The contract's calls, and time's moves that fire heartbeats, are the
facade in `stateful.engine.calls`; the moves are `stateful.engine.driver`'s, the end
`stateful.engine.teardown`'s.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import psycopg

from leasecheck.stateful import clock
from leasecheck.stateful.contract import (
    CALLS,
    STATES,
    Claim,
    ContractError,
    JobId,
)
from leasecheck.stateful.engine import answers, isolation, sending
from leasecheck.stateful.engine.answers import Answered, Outcome, Raised
from leasecheck.stateful.engine.chooser import Chooser, Drawn
from leasecheck.stateful.engine.run import Run
from leasecheck.stateful.engine.scheduler import Scheduler
from leasecheck.stateful.engine.workers import Held, Worker
from leasecheck.stateful.history import History
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import Violation, violation_error
from leasecheck.stateful.units import BEAT, LEASE, stamp
from leasecheck.stateful.verdict.judge import Judge, Rules

MAX_JOBS = 3
CLAIMING = ("claim", "claim_many")


def _slot(w: Worker) -> str:
    """Return the worker's slot: `w1` for w1 and for the w1.3 that replaced it."""
    return w.name.split(".")[0]


def seconds(us: int) -> str:
    """Return simulated microseconds as the story writes them (`units.stamp`)."""
    return stamp(us)


def silent(message: str) -> None:
    """Tell nobody: the default story teller outside a test."""


class Core:
    """What the driver believes and does apart from the contract's calls; it holds the
    scheduler the calls are sent through, and is the scheduler's `Host`."""

    def __init__(
        self,
        harness: Run,
        say: Callable[[str], None] = silent,
        seen: Callable[[str], None] = silent,
    ) -> None:
        self.say = say
        """Tells the story of the example (Hypothesis prints it with a failing one)."""
        self.h = harness
        self.queue = harness.queue
        self.caps = harness.caps
        self.pool = harness.pool
        self.now = 0
        self.history = History()
        self.scheduler = Scheduler(self.pool, self.history, self)
        """Sends the calls and hands back their answers; owns the gates (preemption)."""
        rules = Rules(
            lease=LEASE,
            max_attempts=self.queue.max_attempts,
            max_failures=self.caps.max_failures,
            ordered_tokens=self.caps.ordered_tokens,
            revokes_expired=self.caps.revokes_expired,
            answers_complete=not self.caps.transactional_effects,
            observes=self.caps.state is not None,
            heartbeat_answers=self.caps.heartbeat_answers,
            renews_worker=self.caps.heartbeat_renews == "worker",
        )
        self.judge = Judge(rules, observe=self.observe)
        """Every answer goes to the judge, which writes it down as a fact and judges it."""
        self.oracle = self.judge.oracle
        """What the judge concluded so far; read here, never written."""
        self.oracle.ledger.heard = seen
        """Every situation counted, the oracle's and the driver's, is told to `seen` as it
        is counted (a property run makes each a Hypothesis event); nothing else is."""
        self.sweeper: Worker | None = None
        """The queue's own recovery (`maintain`), on a connection of its own."""
        self.said = 0
        self.workers: list[Worker] = []
        self.jobs: list[str] = []
        self.call_ids = itertools.count(1)
        self.completions: dict[int, tuple[Held, bool | None]] = {}
        """call id -> the claim and the queue's answer (None: the connection died under it)."""
        self.voided: set[int] = set()
        self.ended: list[tuple[str, bool]] = []
        """Every held transaction that ended, in order: its worker's name and whether it
        committed (what a call in flight meanwhile may have waited on)."""
        self.db_dirty = False
        self.broken = False
        self.generation = itertools.count(2)
        self.program: list[Step] = []
        """The moves made so far, as the rules called them: what a failure saves."""
        self.steps = 0
        """Steps made so far: what a pause's `hold` counts."""
        self.chooser: Chooser = Drawn()
        """Who makes the workers' own moves: the pick (`Drawn`), or a priority schedule
        (`stateful.engine.priorities`); see `stateful.engine.chooser`."""
        self.looked = 0
        """History lines already scanned for claims that answered (no-hidden-claims)."""
        self.picked: list[str] = []
        """Whom the step's picks fell on (a worker, or a worker's claim), in order: a
        program's `worker=0` indexes the workers that could act then, not `w0`."""
        self.h.broke_contract = None  # a story is this example's, never an earlier one's

    # ----------------------------------------------------------------- plumbing

    @contextmanager
    def step(self) -> Iterator[None]:
        """Mark the example broken if a step raises, so teardown does not judge it."""
        self.broken = True
        self.steps += 1
        self.picked = []
        try:
            yield
        except ContractError:
            self.contract_broken()
            raise
        self.scheduler.settle()
        self._end_pauses()
        self.broken = False
        self.chooser.step()

    def contract_broken(self) -> None:
        """Keep the example's story for the report: no verdict, but how it got there."""
        self.h.broke(self.history, self.program)

    def _end_pauses(self) -> None:
        """Let each call whose pause has lasted its steps go on, oldest pause first; a
        worker stopped meanwhile (SIGSTOP) goes on with it once it is resumed."""
        parked = {w.name: w for w in self.parked()}
        for name, (since, hold) in sorted(self.scheduler.pauses.items(), key=lambda p: p[1][0]):
            w = parked.get(name)
            if w is None:  # resumed by `resume_call`, or its worker crashed
                del self.scheduler.pauses[name]
            elif self.steps - since >= hold and not w.paused:
                del self.scheduler.pauses[name]
                self.scheduler.resume_call(w)

    def new_worker(self, name: str) -> Worker:
        beat = self.pool.open(f"{name}/beat") if self.caps.heartbeats else None
        return Worker(name=name, main=self.pool.open(name), beat=beat)

    def claim_in_flight(self, call: int) -> None:
        self.judge.claim_sent(call)

    def release_in_flight(self, op: str, releases: Sequence[Held], at: int) -> None:
        """Tell the judge that these claims may be given back from `at` on: their
        completion or failure report is in flight (it may commit before it answers)."""
        for h in releases:
            if h.grant is not None:
                self.judge.releasing(h.grant, op, at)

    def release_lost(self, w: Worker, op: str, h: Held, at: int) -> None:
        """Tell the judge that `h`'s completion or failure report, sent at `at`, lost its
        answer: it may have committed, so the job may have been given back since then.
        Inside a transaction the worker holds, nothing it did outlives the loss."""
        if h.grant is not None and w.txn is None:
            self.judge.release_unknown(h.grant, op, at)

    def claim_over(self, call: int, op: str, outcome: Outcome) -> None:
        """Tell the judge which jobs a claim that was in flight handed out (if known)."""
        if op == "claim":
            raws = [answers.claim(self.queue.name, outcome)]
        else:
            raws = answers.claims(self.queue.name, outcome)
        jobs = [answers.checked(self.queue.name, op, r).job_id for r in raws if r is not None]
        known = isinstance(outcome, (Answered, Raised))
        self.judge.claim_answered(call, jobs, known)

    def observe(self, job_id: JobId) -> str:
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

    def job_label(self, claim: Claim) -> str:
        job = self.oracle.jobs.get(claim.job_id)
        return job.label if job else f"job?{claim.job_id}"

    def instant(self, w: Worker, at: int) -> int:
        """Return the instant `now()` read in `w`'s call sent at `at`: inside the transaction
        `w` holds open, the transaction's start (PostgreSQL's `now()`), else `at`. Only a call
        sent in that transaction answers while it is open: the worker waits for its calls.
        A lease such a call writes starts then; the call still takes effect when it runs."""
        return w.began if w.txn is not None else at

    def apply(self, w: Worker, update: Callable[[], None]) -> None:
        """Apply an oracle update now, or at commit when the worker holds a transaction."""
        if w.txn is None:
            update()
        else:
            w.txn.append(update)

    def saw(self, situation: str) -> None:
        """Count a dangerous situation only the driver sees (`stateful.verdict.coverage`).

        It is written down as a fact, so a history judged again counts it alike, and
        counted in the ledger, which tells `seen`: every count goes that one way."""
        self.judge.situation(situation)

    def last_attempt(self, h: Held) -> bool:
        """Return whether a failure report of `h` is the one that gives its job up: it is
        the last claim the cap on claims allows, or the cap on failures counts it last."""
        claims, failures = self.queue.max_attempts, self.caps.max_failures
        job = self.oracle.jobs.get(h.claim.job_id)
        return (claims is not None and self.attempt(h) == claims) or (
            failures is not None and job is not None and len(job.failed) == failures - 1
        )

    def attempt(self, h: Held) -> int:
        """Return which attempt at its job `h` is: its grant's place among the job's
        grants, counting from 1, or the next one while its claim has not committed (a
        transaction held open: the job's row stays locked, so no other claim commits)."""
        job = self.oracle.jobs.get(h.claim.job_id)
        if job is None:  # a job never enqueued: the judge says so once the claim commits
            return 0
        places = [i for i, g in enumerate(job.grants, 1) if g is h.grant]
        return places[0] if places else len(job.grants) + 1

    def between_transactions(self, w: Worker) -> bool:
        """Return whether `w`'s call is paused at its gate outside any transaction: after
        at least one round trip, each of which committed (autocommit, or a transaction
        block it ended), with more to send. A crash there ends the call halfway, its first
        part kept: the completion whose `done` committed and whose effect never ran."""
        return w.main.parked and not w.main.broken and not w.main.in_transaction

    def end_txn(self, w: Worker, *, commit: bool, why: str = "") -> None:
        updates, undo, calls = w.txn or [], w.undo, w.txn_calls
        w.txn, w.undo, w.txn_calls = None, [], []
        self.ended.append((w.name, commit))
        if commit:
            for update in updates:
                update()
            for h in w.granted:
                if h.next_beat is None and h.believed and w.beat is not None:
                    h.next_beat = self.now + BEAT
        else:
            w.held = [h for h in w.snapshot if h.grant is not None]
            for h in w.held:  # a completion sent in it is void: its claim is held again
                h.completion_sent = False
            self.voided.update(calls)
            self.history.add(self.now, w.name, "rollback", "event", note=why)
            for hook in undo:
                hook()
        w.snapshot = []
        self.db_dirty = True

    def committed(self, w: Worker) -> bool:
        """Commit `w`'s held transaction; return False when PostgreSQL aborted it instead.

        Above READ COMMITTED a commit may fail with a serialization failure (40001, a
        SERIALIZABLE transaction in a dependency cycle): the transaction rolled back, so
        every call in it is void, as when the worker rolls back."""
        try:
            w.main.conn.execute("commit")
        except psycopg.errors.SerializationFailure as exc:
            quote = answers.Raised(exc).quote
            self.saw("serialization failure in a held transaction")
            self.say(f"t={seconds(self.now)} {w.name}'s commit failed: {quote}")
            self.end_txn(w, commit=False, why=f"its commit failed: {quote}")
            return False
        return True

    def replace(self, w: Worker, why: str, *, same_name: bool = False) -> Worker:
        """Crash `w`: end both backends; a fresh worker with a new name takes its place
        (with `same_name`, one the queue is told the old name, as a restarted process is).

        A backend whose call waits on a lock goes first, then one with a call in
        flight: ending the main connection first would roll back its transaction (a
        completion paused in it, say) and let a heartbeat blocked behind it run, racing
        its own termination, so a later claim found the lease extended or not as the
        race fell. A heartbeat connection the worker never sent a
        call on holds nothing and the queue never saw it, so it goes back to the pool
        alive: starting backends was half of the server's CPU in `bench.step_cost`.
        """
        if self.between_transactions(w):
            self.saw("crash between a call's two transactions")
        sessions = [s for s in (w.main, w.beat) if s is not None and (s is w.main or s.used)]
        for session in sorted(sessions, key=lambda s: (not sending.blocked(s), s.pending is None)):
            self.pool.terminate(session)
        self.scheduler.settle()
        if w.txn is not None:
            self.end_txn(w, commit=False, why=why)
        w.crashed = True
        for done in (w.main, w.beat):
            if done is not None:
                self.pool.release(done)
        base = w.name.split(".")[0]
        fresh = self.new_worker(f"{base}.{next(self.generation)}")
        starts = f"{fresh.name} starts"
        if same_name:
            fresh.known_as = w.queue_name
            starts = f"{fresh.name} starts under the old name {fresh.known_as}"
        self.workers[self.workers.index(w)] = fresh
        self.history.add(self.now, w.name, "crash", "event", note=f"{why}; {starts}")
        return fresh

    def may(self, w: Worker, call: str) -> bool:
        """Return whether `w` may make `call` now: outside a held transaction, or one the
        queue lets that call run in."""
        return w.txn is None or call in self.caps.held_calls or call not in CALLS

    def pairs(self, call: str) -> list[tuple[Worker, Held]]:
        return [(w, h) for w in self.workers if w.can_act and self.may(w, call) for h in w.held]

    def pick_pair(self, pick: int, call: str) -> tuple[Worker, Held]:
        """Return a worker's claim to make `call` on: the own move of a worker."""
        pairs = self.pairs(call)
        top = self.chooser.among([_slot(w) for w, _ in pairs])
        if top is not None:
            pairs = [(w, h) for w, h in pairs if _slot(w) == top]
        w, h = pairs[pick % len(pairs)]
        self.picked.append(h.label)
        return w, h

    def claimers(self) -> list[Worker]:
        """Return the workers that may claim now (one job at a time, if the queue says so)."""
        return [
            w
            for w in self.workers
            if w.can_act
            and self.may(w, "claim")
            and not (self.caps.one_claim_per_worker and w.held)
        ]

    def pick(self, workers: list[Worker], pick: int) -> Worker:
        """Return the worker a fault (or a stall) falls on: always the drawn one."""
        w = workers[pick % len(workers)]
        self.picked.append(w.name)
        return w

    def pick_own(self, workers: list[Worker], pick: int) -> Worker:
        """Return the worker that makes its own move: the drawn one, or the one the
        chooser names (under a priority schedule, the one of highest priority)."""
        top = self.chooser.among([_slot(w) for w in workers])
        if top is None:
            return self.pick(workers, pick)
        w = next(w for w in workers if _slot(w) == top)
        self.picked.append(w.name)
        return w

    def lease_ends(self, after: int | None = None) -> list[int]:
        """Return the ends of the leases still held (no report gave them back), in order,
        that lie after `after` (by default now: the ones still ahead)."""
        since = self.now if after is None else after
        return sorted(
            g.lease_end
            for job in self.oracle.jobs.values()
            for g in job.grants
            if not g.released and not job.finished and g.lease_end > since
        )

    def actors(self) -> list[Worker]:
        """Return every worker and the sweeper, if it has started."""
        return [*self.workers, *([self.sweeper] if self.sweeper else [])]

    def parked(self) -> list[Worker]:
        """Return the actors whose call waits at its gate, between two of its statements."""
        return [w for w in self.actors() if w.main.parked]

    def busy(self) -> list[Worker]:
        """Return workers whose crash or cut would change something: they hold work."""
        return [w for w in self.workers if w.held or w.txn is not None or w.waiting is not None]

    def begin(self, w: Worker, level: str | None = None, snapshot: str | None = None) -> None:
        """Open `w`'s held transaction; above READ COMMITTED, run `snapshot` in it if given,
        so the transaction's snapshot is taken now rather than at the queue's first call."""
        w.main.conn.execute(isolation.begin(level))
        taken = snapshot is not None and level in isolation.LEVELS[1:]
        if snapshot is not None and taken:
            w.main.conn.execute(snapshot)
        w.txn, w.undo, w.snapshot = [], [], list(w.held)
        w.began, w.level = self.now, level or ""
        said = f"{level}, snapshot taken" if taken else level or ""
        self.history.add(self.now, w.name, "begin", "event", note=said)
        at = f" ({said})" if said else ""
        self.say(f"t={seconds(self.now)} {w.name} begins a transaction{at}")

    def resume(self, w: Worker) -> None:
        # Its overdue heartbeats fire at the next tick of the clock, not before the
        # worker's own next step: a woken worker may well complete before it learns
        # that its lease ran out.
        w.paused = False
        self.history.add(self.now, w.name, "resume", "event")
        self.say(f"t={seconds(self.now)} {w.name} resumes")

    def open_sweeper(self) -> Worker:
        if self.sweeper is None:
            self.sweeper = Worker(name="sweeper", main=self.pool.open("sweeper"), beat=None)
        return self.sweeper

    def _refresh(self) -> None:
        """Read the ground truth (effect rows) when a step may have changed it."""
        if not self.db_dirty:
            return
        self.db_dirty = False
        rows = self.pool.monitor.execute(clock.QUERIES["effects"].text).fetchall()
        refused = {call for call, (_, said) in self.completions.items() if said is False}
        self.judge.effect_rows(rows, refused, self.voided)

    def check(self) -> None:
        """Raise the first violation found: later ones in the same step are often its echo."""
        self._refresh()
        self._claims_settled()
        said = [*self.oracle.ledger.declared, *self.oracle.ledger.unjudged]
        for line in said[self.said :]:
            self.say(f"  not judged: {line}")
        self.said = len(said)
        for violation in self.oracle.ledger.violations:
            self.raise_violation(violation)

    def _claims_settled(self) -> None:
        """After a step in which a claim answered, have the judge look at what the queue
        shows running (no-hidden-claims); say whether a claim's outcome was left unknown
        (the harness cancelled it, or its connection died) without it being in flight."""
        new = [e for e in self.history.events[self.looked :] if e.op in CLAIMING]
        self.looked = len(self.history.events)
        answered = any(e.kind in ("ok", "fail", "info") for e in new)
        unknown = any(e.kind == "info" or e.value == "cancelled" for e in new)
        if answered or unknown:
            self.judge.claims_settled(unknown)

    def raise_violation(self, violation: Violation) -> None:
        """Fail the example on `violation`, unless its property is excused."""
        if violation.prop in self.h.excused:
            return
        self.broken = True
        timeline = self.h.failed(violation, self.program, self.history, self.judge.to_json())
        raise violation_error(violation.prop)(violation, timeline)

    def clean_up(self) -> None:
        self.h.coverage.update(self.oracle.ledger.situations)
        self.h.moves.update(step.rule for step in self.program)
        for w in [*self.workers, *([self.sweeper] if self.sweeper else [])]:
            for session in (w.main, w.beat):
                if session is not None and not w.crashed:
                    self.pool.release(session)
        self.workers = []
        self.sweeper = None
        self.h.reset()
