"""The driver: the moves of simulated workers, and the teardown that judges the end.

It is composed, not layered: a `Core` (what the harness believes, and the scheduler it
holds), the `Calls` facade over that scheduler, and `stateful.engine.teardown`.

Every move a rule can make is a method here with plain arguments (indices into the
eligible workers or claims, modulo their count), and each `can_*` predicate says,
from the model alone, whether the move means something now. Hypothesis's rules
(`stateful.machine`) are a thin shell over these; a replay and the explorer drive
them directly. Nothing here imports Hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from leasecheck.stateful.contract import ContractError
from leasecheck.stateful.engine import replan, teardown
from leasecheck.stateful.engine.calls import Calls
from leasecheck.stateful.engine.core import MAX_JOBS, Core, seconds, silent
from leasecheck.stateful.engine.priorities import Priorities
from leasecheck.stateful.engine.run import Run
from leasecheck.stateful.engine.timeouts import FAULTS
from leasecheck.stateful.engine.workers import Worker
from leasecheck.stateful.moves import FARTHEST, Stall, Take, landing
from leasecheck.stateful.units import BEAT, LEASE


class Driver:
    """Moves workers, time and faults; judges after every move and at the end.

    It holds the core (what the harness believes: workers, jobs, transactions, the
    judge) and the calls (the facade that sends the contract's calls through the core's
    scheduler); each move is a step of the core's that picks from it and calls through
    the facade.
    """

    def __init__(
        self,
        harness: Run,
        say: Callable[[str], None] = silent,
        seen: Callable[[str], None] = silent,
    ) -> None:
        """`say` tells the example's story; `seen` is told each dangerous situation as it
        is counted (`stateful.verdict.coverage`). Both are injected, so nothing here
        imports Hypothesis: the machine passes its note and its event."""
        self.core = Core(harness, say, seen)
        self.calls = Calls(self.core)

    # -------------------------------------------------------------------- moves

    def start(
        self, workers: int, order: Sequence[int] | None = None, changes: Sequence[int] = ()
    ) -> None:
        """Start the workers and enqueue the first job (an example without one is wasted).

        With `order`, the workers' own moves follow a priority schedule that changes
        after the steps `changes` (`stateful.engine.priorities`).
        """
        if order is not None:
            self.core.chooser = Priorities(order=list(order), changes=list(changes))
        with self.core.step():
            self.core.workers = [self.core.new_worker(f"w{i}") for i in range(workers)]
            self.calls.enqueue()

    def enqueue(self, jobs: int) -> None:
        """The producer adds jobs (never more than MAX_JOBS in one example).

        It takes an argument only so that it sorts after `asleep` and `claim`: see
        `stateful.moves`.
        """
        with self.core.step():
            for _ in range(min(jobs, MAX_JOBS - len(self.core.jobs))):
                self.calls.enqueue()

    def replan(self, grow: int) -> None:
        """ANALYZE the queue's tables while they are tiny, then the producer adds `grow`
        jobs: the planner now believes the tables hold what they held (`stateful.engine.replan`)."""
        with self.core.step():
            names = replan.analyze(self.core.pool.monitor, self.core.h.replanned)
            note = f"analyze {', '.join(names)} at {len(self.core.jobs)} jobs"
            self.core.history.add(self.core.now, "planner", "replan", "event", note=note)
            self.core.say(f"t={seconds(self.core.now)} {note}")
            for _ in range(min(grow, MAX_JOBS - len(self.core.jobs))):
                self.calls.enqueue()
            self.core.saw("tiny tables analyzed, then grown")

    def claim(self, how: Take, level: str | None = None) -> None:
        """A worker claims the next job; with `held`, inside a transaction it keeps open
        (at isolation `level`, if given: `stateful.engine.isolation`)."""
        with self.core.step():
            w = self.core.pick_own(self.core.claimers(), how.worker)
            if how.held and w.txn is None and "claim" in self.core.caps.held_calls:
                self.core.begin(w, level)
            self.calls.claim(w)

    def claim_batch(self, pick: int, size: int) -> None:
        """A worker claims up to `size` jobs in one call (`claim_many`)."""
        with self.core.step():
            self.calls.claim_many(self.core.pick_own(self.core.claimers(), pick), size)

    def complete_batch(self, pick: int, size: int) -> None:
        """A worker completes up to `size` of the jobs it holds, newest first, in one call
        (`complete_many`), stale claims and all: a fresh claim leads, a stale one follows."""
        with self.core.step():
            holders = [
                w
                for w in self.core.workers
                if w.can_act and self.core.may(w, "complete") and w.held
            ]
            w = self.core.pick_own(holders, pick)
            self.calls.complete_many(w, w.held[::-1][:size])

    def heartbeat(self, pick: int) -> None:
        """An explicit heartbeat on the main connection (inside the held transaction, if any)."""
        with self.core.step():
            self.calls.heartbeat(*self.core.pick_pair(pick, "heartbeat"))

    def complete(self, pick: int) -> None:
        """A worker finishes a job it holds, whether or not its lease is still good."""
        with self.core.step():
            w, h = self.core.pick_pair(pick, "complete")
            self.calls.complete(w, h)

    def send_effect(self, pick: int) -> None:
        """A worker sends the job's external effect (a receipt) keyed by effect_key."""
        with self.core.step():
            self.calls.send_effect(*self.core.pick_pair(pick, "send"))

    def fail(self, pick: int) -> None:
        """A worker reports that a job it holds failed (retry, or give up at the cap)."""
        with self.core.step():
            self.calls.fail(*self.core.pick_pair(pick, "fail"))

    def pause(self, pick: int) -> None:
        """SIGSTOP: the worker takes no steps and sends no heartbeats until resumed."""
        with self.core.step():
            w = self.core.pick([w for w in self.core.workers if not w.paused], pick)
            w.paused = True
            self.core.history.add(self.core.now, w.name, "pause", "event")
            self.core.say(f"t={seconds(self.core.now)} {w.name} pauses")

    def resume(self, pick: int) -> None:
        """SIGCONT: the worker acts again; its overdue heartbeats fire at the next tick."""
        with self.core.step():
            self.core.resume(self.core.pick([w for w in self.core.workers if w.paused], pick))

    def asleep(self, how: Stall) -> None:
        """The story's pause in one step: a worker sleeps past the end of its lease (a `long`
        stall a whole lease more), then wakes.

        Unless it sleeps `alone`, the first other worker that can act claims meanwhile.
        `then` is what the woken worker does first with the job it was working on,
        not knowing whether it still owns it: complete, fail, heartbeat or nothing; or,
        for a queue with batches, `batch`: a batch worker's loop, which fetches once
        more and then acknowledges everything it holds in one batch. A completion or
        failure report that answered is followed by the worker's next claim, as its loop
        goes on: a stale report that made the job visible again shows at once.
        (Named to sort first among the rules: see `stateful.moves`.)
        """
        with self.core.step():
            w = self.core.pick(
                [w for w in self.core.workers if not w.paused and w.granted], how.worker
            )
            w.paused = True
            work = max(w.granted, key=lambda h: h.grant.lease_end if h.grant else 0)
            end = work.grant.lease_end if work.grant else self.core.now
            end += LEASE * how.long  # a slow morning: past its lease and one more
            self.core.say(f"t={seconds(self.core.now)} {w.name} stalls past {seconds(end)}")
            self.core.history.add(self.core.now, w.name, "pause", "event", note="stall")
            self.calls.advance(max(end + 1, self.core.now + 1))
            others = [o for o in self.core.claimers() if o is not w]
            if not how.alone and others:
                if self.core.caps.maintain is not None:
                    self.calls.maintain()  # the queue's recovery runs while the worker sleeps
                rival = others[0]
                holds = how.rival != "commits" and "claim" in self.core.caps.held_calls
                if holds and rival.txn is None:
                    self.core.begin(rival)  # its claim's row lock outlasts the step
                self.calls.claim(rival)
                if (
                    holds
                    and how.rival == "holds, lock_timeout"
                    and w.name not in self.calls.timeouts.armed
                ):
                    self.calls.timeouts.arm(w.name)
            self.core.resume(w)
            then = how.then
            if then == "heartbeat" and not self.core.caps.heartbeats:
                then = "nothing"
            if then == "batch" and not self.calls.batches():
                then = "complete"
            if then == "batch":
                self.calls.fetch_and_ack(w)
                return
            if then != "nothing" and work in w.held and w.can_act and self.core.may(w, then):
                {
                    "complete": self.calls.complete,
                    "fail": self.calls.fail,
                    "heartbeat": self.calls.heartbeat,
                }[then](w, work)
                # Its loop goes on and it claims again, once the report has answered: a
                # report paused or blocked in flight leaves it unable to act (no claimer).
                if then != "heartbeat" and w in self.core.claimers() and self.unfinished():
                    self.calls.claim(w)

    def crash(self, pick: int) -> None:
        """The worker's process dies: its connections close, mid-transaction or not."""
        with self.core.step():
            w = self.core.pick(self.core.busy(), pick)
            self.core.say(f"t={seconds(self.core.now)} {w.name} crashes")
            self.core.replace(w, "crashed")

    def restart(self, pick: int) -> None:
        """The worker's process dies and a new one starts under the SAME worker name,
        holding nothing, while the old process's claims may still be unexpired (a
        supervisor's restart, a pod that keeps its hostname). The queue sees one name
        for two processes; the story calls the new one `w1.3` and says whose name it has."""
        with self.core.step():
            w = self.core.pick(self.core.busy(), pick)
            fresh = self.core.replace(w, "restarted", same_name=True)
            said = f"restarts: {fresh.name} comes up under the old name {fresh.known_as}"
            self.core.say(f"t={seconds(self.core.now)} {w.name} {said}")
            if any(h.grant is not None and self.calls.owns(h) for h in w.held):
                self.core.saw("worker restarted under its name while it held a lease")

    def cut(self, pick: int) -> None:
        """The server ends the worker's backend; the worker reconnects and keeps its claims."""
        with self.core.step():
            w = self.core.pick(
                [w for w in self.core.workers if w.txn is not None or w.waiting], pick
            )
            self.core.say(f"t={seconds(self.core.now)} {w.name}'s connection is cut")
            if self.core.between_transactions(w):  # its call dies halfway, as in a crash
                self.core.saw("crash between a call's two transactions")
            self.core.pool.terminate(w.main)
            self.core.scheduler.settle()
            if w.txn is not None:
                self.core.end_txn(w, commit=False, why="connection cut")
            old = w.main
            w.main = self.core.pool.open(w.name)
            self.core.pool.release(old)
            self.core.history.add(self.core.now, w.name, "cut", "event", note="backend terminated")

    def sweep(self, after: str) -> None:
        """The queue's own recovery (`maintain`) runs on a connection of its own, now or
        just after the next lease ends; it may block behind a worker's open transaction."""
        with self.core.step():
            ends = self.core.lease_ends()
            if after == "past-lease-end" and ends:
                self.core.history.add(
                    self.core.now, "clock", "advance", "event", value=seconds(ends[0] + 1)
                )
                self.calls.advance(ends[0] + 1)
            self.calls.maintain()

    def time_passes(self, to: str) -> None:
        """Let time pass; running workers' heartbeats fire on schedule meanwhile.

        Next to a lease end the clock lands a microsecond, a millisecond or a second
        before it, on it, or after it (`moves.NEAR_END`): a queue that counts a lease as run
        out early (or late), at the resolution it stores, shows it only there, as every
        other move lands on whole seconds from a claim. With no lease ending ahead, the
        clock moves on by a second."""
        with self.core.step():
            target, why = self.clock_target(to)
            self.core.history.add(self.core.now, "clock", "advance", "event", value=seconds(target))
            self.core.say(f"t={seconds(self.core.now)} clock advances to {seconds(target)} ({why})")
            self.calls.advance(target)

    def clock_target(self, to: str) -> tuple[int, str]:
        """Return the instant `time_passes(to)` moves the clock to now, and why there."""
        core = self.core
        return landing(to, core.now, core.lease_ends(after=core.now - FARTHEST))

    def open_transaction(self, pick: int, level: str | None = None) -> None:
        """Open a transaction the worker's next calls run inside, held across steps (at
        isolation `level`, if given: `stateful.engine.isolation`).

        It is the application's transaction, which reads before it calls the queue: above
        READ COMMITTED its snapshot is taken now, so whatever commits before the next call
        (the worker's own heartbeat, a reclaim) is a concurrent update to that call. A
        claim `held` opens one whose snapshot is the queue's first statement's instead."""
        with self.core.step():
            w = self.core.pick_own(
                [w for w in self.core.workers if w.can_act and w.txn is None], pick
            )
            self.core.begin(w, level, snapshot=FAULTS["take_snapshot"].text)

    def work_in_transaction(self, pick: int, level: str | None = None) -> None:
        """A worker runs its job's body inside the application's transaction, as a task
        wrapped in one does: it begins (at `level`) and reads, works for a heartbeat
        interval while its heartbeat connection renews the lease, completes the job in
        the transaction and commits. Above READ COMMITTED the renewal is a concurrent
        update to the completion, whose snapshot predates it (40001)."""
        with self.core.step():
            pairs = [(w, h) for w, h in self.core.pairs("complete") if w.txn is None]
            w = self.core.pick_own(list(dict.fromkeys(w for w, _ in pairs)), pick)
            h = next(h for o, h in reversed(pairs) if o is w)  # its newest job
            self.core.begin(w, level, snapshot=FAULTS["take_snapshot"].text)
            target = self.core.now + BEAT
            self.core.history.add(self.core.now, "clock", "advance", "event", value=seconds(target))
            self.core.say(
                f"t={seconds(self.core.now)} {w.name} works on {h.label} until {seconds(target)}"
            )
            self.calls.advance(target)
            if h in w.held and w.can_act and w.txn is not None and w.waiting is None:
                self.calls.complete(w, h)
            if w.can_act and w.txn is not None and w.waiting is None:
                self._close(w, commit=True)  # a call still in flight leaves it open

    def close_transaction(self, pick: int, commit: bool) -> None:
        """Commit or roll back a held transaction; calls blocked behind it go on."""
        with self.core.step():
            w = self.core.pick_own(
                [w for w in self.core.workers if w.can_act and w.txn is not None], pick
            )
            self._close(w, commit)

    def _close(self, w: Worker, commit: bool) -> None:
        self.core.say(
            f"t={seconds(self.core.now)} {w.name} {'commits' if commit else 'rolls back'}"
        )
        if commit and not self.core.committed(w):
            return
        if not commit:
            w.main.conn.execute("rollback")
        if commit:
            self.core.history.add(self.core.now, w.name, "commit", "event")
        self.core.end_txn(w, commit=commit, why="rolled back by the worker")

    def preempt(self, pick: int, after: int, hold: int | None = None) -> None:
        """Arm an actor (a worker, or the queue's sweeper): its next call that sends more
        than `after` round trips is paused after `after` of them, between two of its
        statements (shorter calls before it run whole), and goes on by itself after
        `hold` further steps, or sooner by `resume_call`; without `hold`, only then."""
        with self.core.step():
            name = self._pick_name(self._preemptible(), pick)
            self.core.scheduler.armed[name] = after
            if hold is not None:
                self.core.scheduler.holds[name] = hold
            steps = "" if hold is None else f", for {hold} step{'s' * (hold != 1)}"
            note = f"after statement {after}{steps}"
            self.core.history.add(self.core.now, name, "preempt", "event", note=note)
            said = f"its next call of more statements pauses after statement {after}"
            self.core.say(f"t={seconds(self.core.now)} {name}: {said}")

    def resume_call(self, pick: int) -> None:
        """A call paused between its statements goes on; it may answer, or block on a lock."""
        with self.core.step():
            self.core.scheduler.resume_call(self.core.pick(self.core.parked(), pick))

    def time_out(self, pick: int) -> None:
        """Arm a worker as a production `lock_timeout` would: its calls run with the
        real setting on their session until one of them waits on a lock, which
        PostgreSQL then ends with lock_not_available (55P03), the queue's answer.

        Deterministic: the only lock waits a step lets last are on transactions held
        between steps (or calls paused or blocked in them), which nothing releases
        within the step, so the wait surely outlasts the timeout (1 ms); `settle`
        never counts such a call as held still, it waits until PostgreSQL ends it.
        A call that waits on nothing answers as it would have."""
        with self.core.step():
            self.calls.timeouts.arm(self._pick_name(self.calls.timeouts.armable(), pick))

    def _preemptible(self) -> list[str]:
        names = [w.name for w in self.core.workers if w.can_act]
        if self.core.caps.maintain is not None and (
            self.core.sweeper is None or self.core.sweeper.can_act
        ):
            names.append("sweeper")
        return [n for n in names if n not in self.core.scheduler.armed]

    @staticmethod
    def _pick_name(names: list[str], pick: int) -> str:
        return names[pick % len(names)]

    # --------------------------------------------------------------- predicates
    # Whether a move means something now, read from the model alone (never the
    # database), so the same program offers the same moves on every run.

    def unfinished(self) -> bool:
        return any(not j.finished for j in self.core.oracle.jobs.values())

    def can_enqueue(self) -> bool:
        return len(self.core.jobs) < MAX_JOBS

    def can_replan(self) -> bool:
        return len(self.core.jobs) < MAX_JOBS and self.core.h.can_replan()

    def can_claim(self) -> bool:
        return bool(self.core.claimers()) and self.unfinished()

    def can_claim_batch(self) -> bool:
        return self.calls.batch_claims() and self.can_claim()

    def can_complete_batch(self) -> bool:
        return self.calls.batches() and bool(self.core.pairs("complete"))

    def can_heartbeat(self) -> bool:
        return self.core.caps.heartbeats and bool(self.core.pairs("heartbeat"))

    def can_call(self, call: str) -> bool:
        """Whether some worker holds a claim it may `call` (complete, fail, send) now."""
        return bool(self.core.pairs(call))

    def can_pause(self) -> bool:
        return any(not w.paused for w in self.core.workers)

    def can_resume(self) -> bool:
        return any(w.paused for w in self.core.workers)

    def can_stall(self) -> bool:
        return any(not w.paused and w.granted for w in self.core.workers)

    def can_crash(self) -> bool:
        return bool(self.core.busy())

    def can_restart(self) -> bool:
        return self.core.h.restarts and bool(self.core.busy())

    def can_cut(self) -> bool:
        return any(w.txn is not None or w.waiting for w in self.core.workers)

    def can_sweep(self) -> bool:
        return self.core.caps.maintain is not None and (
            self.core.sweeper is None or self.core.sweeper.waiting is None
        )

    def can_open_transaction(self) -> bool:
        return bool(self.core.caps.held_calls) and any(
            w.can_act and w.txn is None for w in self.core.workers
        )

    def can_time_out(self) -> bool:
        # Only a lock held across steps can make a call wait: a transaction held open, or
        # a call paused or blocked in one. Without one, arming would time out nothing.
        # The timeout is a setting on the harness's session, which a queue's own client
        # does not run on (`contract.Clients`).
        holding = any(w.txn is not None or w.waiting is not None for w in self.core.actors())
        return holding and not self.core.caps.connects and bool(self.calls.timeouts.armable())

    def can_preempt(self) -> bool:
        return bool(self._preemptible())

    def can_resume_call(self) -> bool:
        return bool(self.core.parked())

    def can_work_in_transaction(self) -> bool:
        return "complete" in self.core.caps.held_calls and any(
            w.txn is None for w, _ in self.core.pairs("complete")
        )

    def can_close_transaction(self) -> bool:
        return any(w.can_act and w.txn is not None for w in self.core.workers)

    def check(self) -> None:
        """Judge every property now; raise the first violation's exception."""
        try:
            self.core.check()
        except ContractError:  # a state() answer outside the contract, read to judge
            self.core.contract_broken()
            raise

    # ----------------------------------------------------------------- teardown

    def teardown(self) -> None:
        try:
            if not self.core.broken and self.core.workers:
                teardown.heal_and_drain(self.core, self.calls)
        except ContractError:
            self.core.contract_broken()
            raise
        finally:
            self.core.clean_up()
