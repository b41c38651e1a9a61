"""The moves a state offers the explorer: each rule with each distinct choice it has.

Each rule is offered with each worker or claim the model lets it fall on (its `pick`,
an index into the same list the driver picks from), `asleep` (the story's stall)
among them, as it reaches in one move what takes the others four.

A `long` stall is offered only when its worker sleeps alone: what a long sleep adds is
the waking worker's late call on a lease nobody took, which no rival's claim precedes
(with a rival, the scope meets the takeover in the short stall). With one worker there
is no rival to claim while it sleeps, so a stall that does not sleep alone would play
the lone one again (`Driver.asleep`): only the lone one is offered.

Workers are equal up to their names, so of the workers that have done nothing yet
(no call, no fault, nothing held) only the first is offered a move: what the others
would do is the same program under another name. A queue that treats worker names
as more than opaque labels (orders or compares them) is not searched whole by this
reduction; none of the contract's calls gives it a reason to.
"""

from __future__ import annotations

from collections.abc import Sequence

from leasecheck.stateful.engine import isolation
from leasecheck.stateful.engine.core import MAX_JOBS
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.moves import RIVALS, WAKE_UP, Stall, Take
from leasecheck.stateful.engine.workers import Worker
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.program import Step

AFTERS = (1, 2, 3)


def enabled(d: Driver, scope: Scope, preempted: int) -> list[Step]:
    """Return every distinct move the model offers now, within `scope`'s rules."""
    core = d.core
    twins = _twins(d)
    out: list[Step] = []

    def offer(rule: str, among: Sequence[Worker | str], **extra: object) -> None:
        for i, who in enumerate(among):
            name = who if isinstance(who, str) else who.name
            if name not in twins:
                out.append(Step(rule, {"pick": i, **extra}))

    held_claims = "claim" in core.caps.held_calls and scope.held_claims
    if d.can_claim():
        for i, w in enumerate(core.claimers()):
            if w.name in twins:
                continue
            out.append(Step("claim", {"how": Take(worker=i, held=False)}))
            if held_claims:
                out.extend(
                    Step("claim", {"how": Take(worker=i, held=True)} | _level(level))
                    for level in _levels(core.h.isolation)
                )
    if d.can_claim_batch():
        for size in (1, 2):
            offer("claim_batch", core.claimers(), size=size)
    if d.can_complete_batch():
        holders = [w for w in core.workers if w.can_act and core.may(w, "complete") and w.held]
        for size in (1, 2):
            offer("complete_batch", holders, size=size)
    if d.can_heartbeat():
        out.extend(Step("heartbeat", {"pick": i}) for i in range(len(core.pairs("heartbeat"))))
    for rule, call in (("complete", "complete"), ("fail", "fail"), ("send_effect", "send")):
        out.extend(Step(rule, {"pick": i}) for i in range(len(core.pairs(call))))
    if d.can_stall():
        stallers = [w for w in core.workers if not w.paused and w.granted]
        rivals: tuple[str, ...] = RIVALS if held_claims else RIVALS[:1]
        if len(core.workers) == 1:
            rivals = ()  # no rival claims while it sleeps (see the module's docstring)
        wake_ups = _wake_ups(d)
        for i in range(len(stallers)):
            hows = [Stall(worker=i, alone=False, then=t, rival=r) for t in wake_ups for r in rivals]
            hows += [Stall(i, alone=True, then=t, long=n) for t in wake_ups for n in (False, True)]
            out.extend(Step("asleep", {"how": how}) for how in hows)
    offer("pause", [w for w in core.workers if not w.paused])
    offer("resume", [w for w in core.workers if w.paused])
    if d.can_crash():
        offer("crash", core.busy())
    if d.can_restart():
        offer("restart", core.busy())
    offer("cut", [w for w in core.workers if w.txn is not None or w.waiting])
    if d.can_sweep():
        out.extend(Step("sweep", {"after": a}) for a in ("now", "past-lease-end"))
    out.extend(Step("time_passes", {"to": t}) for t in scope.times)
    if d.can_replan():  # each distinct number of jobs the tables grow by once analyzed
        out.extend(Step("replan", {"grow": g}) for g in range(1, MAX_JOBS - len(core.jobs) + 1))
    levels = _levels(core.h.isolation)
    if d.can_open_transaction():
        for level in levels:
            idle = [w for w in core.workers if w.can_act and w.txn is None]
            offer("open_transaction", idle, **_level(level))
    if d.can_close_transaction():
        holding = [w for w in core.workers if w.can_act and w.txn is not None]
        for commit in (True, False):
            offer("close_transaction", holding, commit=commit)
    if preempted < scope.preemptions and d.can_preempt():
        for after in AFTERS:
            offer("preempt", d._preemptible(), after=after)
    offer("resume_call", core.parked())
    if d.can_time_out():
        offer("time_out", d.calls.timeouts.armable())
    return [step for step in out if scope.offers(step.rule)]


def _wake_ups(d: Driver) -> list[str]:
    """Return what a woken worker may do first that this queue tells apart: without
    heartbeats a `heartbeat` wake-up does nothing, and without batches a `batch` one
    completes (`Driver.asleep`), so neither is offered again under its other name."""
    told_apart = {"heartbeat": d.core.caps.heartbeats, "batch": d.calls.batches()}
    return [t for t in WAKE_UP if told_apart.get(t, True)]


def _twins(d: Driver) -> set[str]:
    """Return the workers that have done nothing yet, but the first of them: each is the
    first under another name (see the module's docstring)."""
    core = d.core
    acted = {e.worker for e in core.history.events}
    armed = set(core.scheduler.armed) | d.calls.timeouts.armed
    fresh = [
        w.name
        for w in core.workers
        if w.name not in acted
        and w.name not in armed
        and not (w.known_as or w.paused or w.crashed or w.held or w.txn is not None)
    ]
    return set(fresh[1:])


def _levels(mode: str) -> tuple[str | None, ...]:
    """Return the levels a held transaction is opened at under `mode` (None: the default
    machine's, which names none)."""
    if mode == isolation.DEFAULT:
        return (None,)
    return isolation.LEVELS if mode == "drawn" else (mode.replace("-", " "),)


def _level(level: str | None) -> dict[str, str]:
    return {} if level is None else {"level": level}
