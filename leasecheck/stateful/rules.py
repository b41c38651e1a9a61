"""The moves: one table that the machine, the explorer and the opening all read.

Each `Rule` names a move of `stateful.engine.driver.Driver` (the method of that name
plays it), says when it means something (`when`, the driver's `can_*`, read from the
model alone), what Hypothesis draws for it (`draws`), and every distinct choice it
has in a state (`offers`), which the explorer searches one by one. A move added here
is drawn by the machine and searched by the explorer at once; neither keeps a list of
its own (`stateful.machine.build`, `stateful.exhaustive.moves.enabled`), and a story
of the opening that names a move not here fails its test.

A variant of the machine (`Variant`: a priority schedule, held transactions at drawn
isolation levels) is data the table is read with, never a subclass: `start` draws a
priority order and change points under PCT, and the moves that open a held
transaction draw its level when the mode is not the default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from leasecheck.stateful.engine import isolation, priorities
from leasecheck.stateful.engine.core import MAX_JOBS
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.engine.workers import Worker
from leasecheck.stateful.moves import RIVALS, TIMES, WAKE_UP, Stall, Take

Args = dict[str, Any]

PICK = st.integers(min_value=0, max_value=7)
"""An index into the workers (or held claims) eligible for a rule, taken modulo their count."""

AFTER = st.integers(min_value=1, max_value=3)
"""After how many round trips a preempted call pauses (a transaction's BEGIN is one)."""

HOLD = st.integers(min_value=1, max_value=6)
"""How many further steps a call paused between its statements waits before it goes on
by itself (`resume_call` may end the pause sooner). Left to `resume_call` alone, a pause
mostly lasted until the worker crashed or the example ended: in one `ci` run 93 calls
paused and 11 went on before teardown, so the race a pause opens was rarely closed.
The simplest value, one step between two statements, is the shallowest preemption."""

BATCH = st.integers(min_value=1, max_value=3)
"""How many jobs a batch claim asks for, or a batch completion takes."""

TAKE = st.builds(Take, worker=PICK, held=st.booleans())
STALL = st.builds(
    Stall,
    worker=PICK,
    alone=st.booleans(),
    then=st.sampled_from(WAKE_UP),
    rival=st.sampled_from(RIVALS),
    long=st.booleans(),
)

ORDERS = st.permutations(range(5))
"""A priority schedule's order: worker i's priority is entry i (at most five workers)."""

CHANGES = st.lists(
    st.integers(min_value=1, max_value=40), max_size=priorities.DEPTH - 1, unique=True
)
"""The steps after which the worker that acted last drops below every other."""

SCHEDULES = ("random", "pct")
"""How the workers' own moves are ordered: uniform picks, or a priority schedule (PCT,
`stateful.engine.priorities`)."""


@dataclass(frozen=True)
class Variant:
    """What a machine is built for: its schedule (one of `SCHEDULES`) and the isolation
    mode of its held transactions (`stateful.engine.isolation`)."""

    schedule: str = "random"
    mode: str = isolation.DEFAULT

    @property
    def isolated(self) -> bool:
        """Whether held transactions draw their level (any mode but the default)."""
        return self.mode != isolation.DEFAULT


@dataclass(frozen=True)
class Choosing:
    """What the explorer knows of a state beyond the driver: which workers are twins of
    an earlier one (offered nothing), and what its scope lets a move choose."""

    twins: frozenset[str]
    held_claims: bool
    """Whether a claim may run inside a transaction held open."""
    times: tuple[str, ...]
    """Where `time_passes` may move the clock."""
    preempt: bool
    """Whether a preemption is left in the program's budget."""
    levels: tuple[str | None, ...]
    """The levels a held transaction is opened at (None: the default's, named by none)."""

    def picks(self, among: Sequence[Worker | str], **extra: Any) -> Iterator[Args]:
        """Yield a `pick` of each worker in `among` but the twins, with `extra`."""
        for i, who in enumerate(among):
            name = who if isinstance(who, str) else who.name
            if name not in self.twins:
                yield {"pick": i, **extra}


Offers = Callable[[Driver, Choosing], Iterator[Args]]


@dataclass(frozen=True)
class Rule:
    """One move: its name (the driver's method), when it means something, what
    Hypothesis draws for it, and the distinct choices the explorer offers."""

    name: str
    draws: Mapping[str, st.SearchStrategy[Any]]
    when: Callable[[Driver], bool] | None = None
    offers: Offers | None = None
    """None: the explorer never offers it: `start` and `enqueue` are a scope's start;
    `work_in_transaction` is a run of moves it offers one by one."""
    leveled: bool = False
    """It opens a held transaction, whose level it draws when the mode is not the default."""
    initial: bool = False
    """It starts every example (Hypothesis's `initialize`), and draws the priority
    schedule under PCT."""
    isolated_only: bool = False
    """Only a machine whose held transactions draw their level has it."""

    def arguments(self, variant: Variant) -> dict[str, st.SearchStrategy[Any]]:
        """Return what Hypothesis draws for this move in `variant`."""
        drawn = dict(self.draws)
        if self.leveled and variant.isolated:
            drawn["level"] = isolation.strategy(variant.mode)
        if self.initial and variant.schedule == "pct":
            drawn |= {"order": ORDERS, "changes": CHANGES}
        return drawn

    def present(self, variant: Variant) -> bool:
        return variant.isolated or not self.isolated_only


def _level(level: str | None) -> Args:
    return {} if level is None else {"level": level}


def _claim(d: Driver, c: Choosing) -> Iterator[Args]:
    for i, w in enumerate(d.core.claimers()):
        if w.name in c.twins:
            continue
        yield {"how": Take(worker=i, held=False)}
        if c.held_claims:
            for level in c.levels:
                yield {"how": Take(worker=i, held=True)} | _level(level)


def _claim_batch(d: Driver, c: Choosing) -> Iterator[Args]:
    for size in (1, 2):
        yield from c.picks(d.core.claimers(), size=size)


def _complete_batch(d: Driver, c: Choosing) -> Iterator[Args]:
    core = d.core
    holders = [w for w in core.workers if w.can_act and core.may(w, "complete") and w.held]
    for size in (1, 2):
        yield from c.picks(holders, size=size)


def _each_pair(call: str) -> Offers:
    """Offer a `pick` of each (worker, claim) pair that may make `call`."""

    def offers(d: Driver, c: Choosing) -> Iterator[Args]:
        return ({"pick": i} for i in range(len(d.core.pairs(call))))

    return offers


def _asleep(d: Driver, c: Choosing) -> Iterator[Args]:
    """Each stall of each worker that may fall asleep holding a grant.

    A `long` stall is offered only when its worker sleeps alone: what a long sleep
    adds is the waking worker's late call on a lease nobody took, which no rival's
    claim precedes (with a rival, the scope meets the takeover in the short stall).
    With one worker there is no rival to claim while it sleeps, so a stall that does
    not sleep alone would play the lone one again (`Driver.asleep`): only the lone one
    is offered."""
    core = d.core
    stallers = [w for w in core.workers if not w.paused and w.granted]
    rivals: tuple[str, ...] = RIVALS if c.held_claims else RIVALS[:1]
    if len(core.workers) == 1:
        rivals = ()
    wake_ups = _wake_ups(d)
    for i in range(len(stallers)):
        hows = [Stall(worker=i, alone=False, then=t, rival=r) for t in wake_ups for r in rivals]
        hows += [Stall(i, alone=True, then=t, long=n) for t in wake_ups for n in (False, True)]
        yield from ({"how": how} for how in hows)


def _wake_ups(d: Driver) -> list[str]:
    """Return what a woken worker may do first that this queue tells apart: without
    heartbeats a `heartbeat` wake-up does nothing, and without batches a `batch` one
    completes (`Driver.asleep`), so neither is offered again under its other name."""
    told_apart = {"heartbeat": d.core.caps.heartbeats, "batch": d.calls.batches()}
    return [t for t in WAKE_UP if told_apart.get(t, True)]


def _among(workers: Callable[[Driver], Sequence[Worker | str]]) -> Offers:
    """Offer a `pick` of each worker `workers` lists (but the twins)."""
    return lambda d, c: c.picks(workers(d))


def _replan(d: Driver, c: Choosing) -> Iterator[Args]:
    """Each distinct number of jobs the tables grow by once analyzed."""
    return ({"grow": g} for g in range(1, MAX_JOBS - len(d.core.jobs) + 1))


def _open_transaction(d: Driver, c: Choosing) -> Iterator[Args]:
    idle = [w for w in d.core.workers if w.can_act and w.txn is None]
    for level in c.levels:
        yield from c.picks(idle, **_level(level))


def _close_transaction(d: Driver, c: Choosing) -> Iterator[Args]:
    holding = [w for w in d.core.workers if w.can_act and w.txn is not None]
    for commit in (True, False):
        yield from c.picks(holding, commit=commit)


AFTERS = (1, 2, 3)
"""After how many round trips the explorer pauses a preempted call."""


def _preempt(d: Driver, c: Choosing) -> Iterator[Args]:
    if c.preempt:
        for after in AFTERS:
            yield from c.picks(d._preemptible(), after=after)


SWEEPS = ("now", "past-lease-end")


def _unpaused(d: Driver) -> list[Worker]:
    return [w for w in d.core.workers if not w.paused]


def _paused(d: Driver) -> list[Worker]:
    return [w for w in d.core.workers if w.paused]


def _cuttable(d: Driver) -> list[Worker]:
    return [w for w in d.core.workers if w.txn is not None or w.waiting]


def _clock_moves(d: Driver, times: Sequence[str]) -> Iterator[Args]:
    """Yield a move of the clock to each distinct instant `times` reach from here: with
    no lease ending ahead, eight of them land one second on, and are one move."""
    reached = set()
    for t in times:
        target, _ = d.clock_target(t)
        if target not in reached:
            reached.add(target)
            yield {"to": t}


RULES: tuple[Rule, ...] = (
    Rule("start", {"workers": st.integers(min_value=2, max_value=5)}, initial=True),
    # The producer's move takes an argument only so that it sorts after `asleep` and
    # `claim` (`stateful.moves`); a scope's start plays it, the explorer never offers it.
    Rule("enqueue", {"jobs": st.integers(min_value=1, max_value=MAX_JOBS - 1)}, Driver.can_enqueue),
    Rule("claim", {"how": TAKE}, Driver.can_claim, _claim, leveled=True),
    Rule("claim_batch", {"pick": PICK, "size": BATCH}, Driver.can_claim_batch, _claim_batch),
    Rule(
        "complete_batch", {"pick": PICK, "size": BATCH}, Driver.can_complete_batch, _complete_batch
    ),
    Rule("heartbeat", {"pick": PICK}, Driver.can_heartbeat, _each_pair("heartbeat")),
    Rule("complete", {"pick": PICK}, lambda d: d.can_call("complete"), _each_pair("complete")),
    Rule("fail", {"pick": PICK}, lambda d: d.can_call("fail"), _each_pair("fail")),
    Rule("send_effect", {"pick": PICK}, lambda d: d.can_call("send"), _each_pair("send")),
    Rule("asleep", {"how": STALL}, Driver.can_stall, _asleep),
    Rule("pause", {"pick": PICK}, Driver.can_pause, _among(_unpaused)),
    Rule("resume", {"pick": PICK}, Driver.can_resume, _among(_paused)),
    Rule("crash", {"pick": PICK}, Driver.can_crash, _among(lambda d: d.core.busy())),
    Rule("restart", {"pick": PICK}, Driver.can_restart, _among(lambda d: d.core.busy())),
    Rule("cut", {"pick": PICK}, Driver.can_cut, _among(_cuttable)),
    Rule(
        "sweep",
        {"after": st.sampled_from(SWEEPS)},
        Driver.can_sweep,
        lambda d, c: ({"after": a} for a in SWEEPS),
    ),
    Rule(
        "time_passes",
        {"to": st.sampled_from(TIMES)},
        None,
        lambda d, c: _clock_moves(d, c.times),
    ),
    Rule(
        "replan",
        {"grow": st.integers(min_value=1, max_value=MAX_JOBS - 1)},
        Driver.can_replan,
        _replan,
    ),
    Rule(
        "open_transaction",
        {"pick": PICK},
        Driver.can_open_transaction,
        _open_transaction,
        leveled=True,
    ),
    Rule(
        "work_in_transaction",
        {"pick": PICK},
        Driver.can_work_in_transaction,
        leveled=True,
        isolated_only=True,
    ),
    Rule(
        "close_transaction",
        {"pick": PICK, "commit": st.booleans()},
        Driver.can_close_transaction,
        _close_transaction,
    ),
    Rule("preempt", {"pick": PICK, "after": AFTER, "hold": HOLD}, Driver.can_preempt, _preempt),
    Rule("resume_call", {"pick": PICK}, Driver.can_resume_call, _among(lambda d: d.core.parked())),
    Rule(
        "time_out",
        {"pick": PICK},
        Driver.can_time_out,
        _among(lambda d: d.calls.timeouts.armable()),
    ),
)
"""Every move, in the order the explorer offers them (Hypothesis orders a machine's
rules by their number of arguments, then by name: `stateful.moves`)."""

BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
