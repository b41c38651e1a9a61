"""Read a history, with the judge's leases, into what the picture draws.

One pass over the history: every answer or event gets a column; each claim becomes a
bar that ends at its completion, failure, crash or rollback; heartbeats, completions,
failures and sent effects become marks on their bar; everything else a mark on its lane.

A claim's job, token and worker come from its saved answer (`{"job_id", "token",
"worker"}`), or, in a file that saved a user's claim type as its repr, from the judge's
grant fact for that answer: any claim type draws the same bars.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leasecheck.stateful.history import Event, History
from leasecheck.stateful.story.claimtext import saved_claim, short_label, token_text
from leasecheck.stateful.story.svg.style import PALETTE
from leasecheck.stateful.verdict.grants import Grant
from leasecheck.stateful.verdict.judge import Judge

STRIP = ("producer", "clock")
"""Lanes drawn as thin rows at the top, one each: they hold no leases."""


@dataclass(eq=False)
class Bar:
    """One claim: its lease, how it ended, and what happened on it."""

    worker: str
    job: str
    token: str | None
    col: int
    lease_end: int
    wait_col: int | None = None
    end_col: int | None = None
    end_why: str = ""
    row: int = 0
    hot: bool = False
    marks: list[tuple[int, str, bool]] = field(default_factory=list)
    """(column, op, accepted) of heartbeats, completions, failures and sends on the bar."""
    voided: set[int] = field(default_factory=set)
    lapses: list[tuple[int, int]] = field(default_factory=list)
    """(lease end, column of the heartbeat that revived it) for each lapse."""
    grant: Grant | None = None
    """The judge's grant for this claim (None: never committed); its lease is the bar's."""
    beats: dict[int, int] = field(default_factory=dict)
    """When each heartbeat on the bar was sent -> its column."""

    @property
    def ref(self) -> str:
        """How a violation names this claim: the judge's grant label, `w0:job1#1`."""
        return self.grant.label if self.grant else f"{self.worker}:{self.job}#{self.token}"

    @property
    def label(self) -> str:
        """The bar's text: `job1#1`."""
        return short_label(self.job, self.token)


@dataclass
class Mark:
    """A marker that belongs to a lane rather than to a bar."""

    col: int
    lane: str
    kind: str
    label: str
    title: str


@dataclass
class Parsed:
    """Everything the picture draws, in history columns (not yet in x)."""

    cols: list[Event] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    pauses: list[tuple[str, int, int | None, str]] = field(default_factory=list)
    waits: list[tuple[str, int, int]] = field(default_factory=list)
    jobs: dict[str, str] = field(default_factory=dict)
    """Job label -> its colour, in order of first appearance."""
    lanes: list[str] = field(default_factory=list)


def parse(history: History, judge: Judge, *, heartbeat_answers: bool = True) -> Parsed:
    """Walk the history once: columns, bars with their ends, lane markers.

    With `heartbeat_answers` False (a fire-and-forget heartbeat), a heartbeat's answer
    is nobody's: it is drawn as sent, neither accepted nor refused.
    """
    reader = Reader(judge, heartbeat_answers=heartbeat_answers)
    for e in history.events:
        reader.read(e)
    return reader.done()


def answers_heartbeats(history: History, judge: Judge) -> bool:
    """Guess, for a file that does not say, whether the queue's heartbeat answers.

    A fire-and-forget heartbeat leaves no heartbeat fact and answers nothing (None);
    a heartbeat that answers returns a bool, which the judge is told.
    """
    if any(f.op == "heartbeat" for f in judge.facts):
        return True
    beats = [e.value for e in history.events if e.op == "heartbeat" and e.kind == "ok"]
    return all(isinstance(v, bool) for v in beats)


_Key = tuple[str, str, str | None, str | None]


class Reader:
    """What the history has said so far: open bars, transactions, pauses, blocked calls."""

    def __init__(self, judge: Judge, *, heartbeat_answers: bool = True) -> None:
        self.judge = judge
        self.heartbeat_answers = heartbeat_answers
        self.lease = judge.rules.lease
        self.p = Parsed()
        self.ids: dict[str, str] = {}
        self.invoked: dict[_Key, float] = {}
        self.blocked: dict[tuple[str, str], int] = {}
        self.open: dict[str, list[Bar]] = {}
        self.txn: dict[str, tuple[list[Bar], list[Bar]]] = {}
        self.paused: dict[str, tuple[int, str]] = {}

    def read(self, e: Event) -> None:
        p = self.p
        if e.worker not in STRIP and e.worker not in p.lanes:
            p.lanes.append(e.worker)
        key = (e.worker, e.op, e.job, e.token)
        if e.kind == "invoke":
            self.invoked[key] = e.at
            return
        col = len(p.cols)
        p.cols.append(e)
        sent = self.invoked.get(key, e.at)  # the oracle dates a call by when it was sent
        waited = self.blocked.pop((e.worker, e.op), None) if e.kind != "event" else None
        if e.op == "enqueue" and e.kind == "ok":
            self.ids[str(e.value)] = self._job(e.job or "?")
            p.marks.append(Mark(col, e.worker, "enqueue", f"+{e.job}", f"enqueue {e.job}"))
        elif e.op == "claim" and e.kind == "ok":
            self._claimed(e, col, int(sent), waited)
        elif e.op in ("heartbeat", "complete", "fail", "send") and e.kind != "event":
            self._on_bar(e, col, int(sent), waited)
        elif e.kind == "event":
            self._event(e, col)
        else:
            title = f"{e.op} {e.kind}: {e.note or e.value}"
            p.marks.append(Mark(col, e.worker, "loose", e.op, title))

    def done(self) -> Parsed:
        for b in self.p.bars:  # a heartbeat the judge took after the lease ran out revived it
            for at, ended in b.grant.renewals if b.grant else []:
                if at > ended and at in b.beats:
                    b.lapses.append((ended, b.beats[at]))
        for worker, (start, why) in self.paused.items():
            self.p.pauses.append((worker, start, None, why))
        return self.p

    def _job(self, label: str) -> str:
        self.p.jobs.setdefault(label, PALETTE[len(self.p.jobs) % len(PALETTE)])
        return label

    def _claimed(self, e: Event, col: int, sent: int, waited: int | None) -> None:
        """A claim's answer: a bar for the claim it names, or a mark when it names none."""
        # The lease is the judge's: from the claim, extended by the heartbeats it
        # accepted as the owner's. A claim never committed keeps the lease it was given.
        grant = self.judge.grant_of(e.seq)
        seen = saved_claim(e.value)
        if seen is not None:
            job_id, token = seen.job_id, seen.token
        elif grant is not None:  # saved as its repr: the judge's grant fact names it
            job_id, token = grant.claim.job_id, _granted_token(grant)
        else:
            label, title = ("nothing", "claim: nothing to claim")
            if e.value is not None:  # a repr nobody committed: which job, no fact says
                label, title = "claim?", f"claim answered {e.value} (never committed)"
            self.p.marks.append(Mark(col, e.worker, "loose", label, title))
            return
        job = self._job(self.ids.get(str(job_id), f"job?{job_id}"))
        lease_end = grant.lease_end if grant else sent + self.lease
        b = Bar(e.worker, job, token, col, lease_end, waited, grant=grant)
        self.p.bars.append(b)
        self.open.setdefault(e.worker, []).append(b)
        if e.worker in self.txn:
            self.txn[e.worker][0].append(b)

    def _bar_of(self, e: Event) -> Bar | None:
        """The open bar a call on a held claim belongs to: same job and token, else same job.

        The job alone decides when the claim's answer saved its token in another form
        than the call's line (a plain value, not its repr).
        """
        mine = [b for b in reversed(self.open.get(e.worker, [])) if b.job == e.job]
        same = [b for b in mine if e.token is None or b.token == e.token]
        found = same or mine
        return found[0] if found else None

    def _end(self, b: Bar, col: int, why: str) -> None:
        b.end_col, b.end_why = col, why
        self.open[b.worker].remove(b)
        if b.worker in self.txn:
            self.txn[b.worker][1].append(b)

    def _on_bar(self, e: Event, col: int, sent: int, waited: int | None) -> None:
        """A heartbeat, completion, failure or sent effect of a claim the worker holds."""
        held = self._bar_of(e)
        value = e.value
        accepted = value is True or (isinstance(value, dict) and bool(value.get("accepted")))
        op = e.op if e.kind == "ok" else f"{e.op}:{e.kind}"
        if e.op == "heartbeat" and e.kind == "ok" and not self.heartbeat_answers:
            op = "heartbeat:sent"  # fire and forget: its answer is nobody's
        if held is None:
            title = f"{e.op} {e.job} ({e.kind})"
            self.p.marks.append(Mark(col, e.worker, "loose", e.op, title))
        else:
            held.marks.append((col, op, accepted))
            if e.op == "heartbeat":
                held.beats.setdefault(sent, col)
            elif e.op in ("complete", "fail"):
                self._end(held, col, e.op)
        if waited is not None:
            self.p.waits.append((e.worker, waited, col))

    def _event(self, e: Event, col: int) -> None:
        """Handle one `event` line: pauses, crashes, cuts, transactions, blocked calls."""
        p, w = self.p, e.worker
        title = " ".join(str(x) for x in (e.op, e.job or "", e.value or "", e.note) if x)
        kind, label = "event", e.op
        if w == "clock":
            kind, label, title = "advance", f"→{e.value}", f"clock advances to {e.value}"
        elif e.op == "pause":
            self.paused[w] = (col, e.note or "paused")
            kind, label = "pause", e.note or "pause"
        elif e.op == "resume":
            start, why = self.paused.pop(w, (col, "paused"))
            p.pauses.append((w, start, col, why))
            kind = "resume"
        elif e.op == "crash":
            for b in list(self.open.get(w, [])):
                self._end(b, col, "crash")
            if w in self.paused:
                start, why = self.paused.pop(w)
                p.pauses.append((w, start, col, why))
            kind = "crash"
        elif e.op == "begin":
            self.txn[w] = ([], [])
            kind = "txn"
        elif e.op in ("commit", "rollback"):
            claimed, ended = self.txn.pop(w, ([], []))
            if e.op == "rollback":
                self._roll_back(claimed, ended, col)
            kind = "txn"
        elif _waited(e) == "blocked":
            self.blocked[(w, e.op)] = col
            kind, label = "blocked", f"{e.op} waits"
        elif _waited(e) == "cancelled":
            kind, label = "cancel", f"{e.op} cancelled"
        elif e.op == "cut":
            kind = "cut"
        p.marks.append(Mark(col, w, kind, label, title))

    def _roll_back(self, claimed: list[Bar], ended: list[Bar], col: int) -> None:
        """Undo a transaction: its claims are dropped, its completions and failures undone."""
        for b in ended:
            if b.end_why in ("complete", "fail") and b.end_col is not None:
                b.voided.add(b.end_col)
                b.end_col, b.end_why = None, ""
                self.open.setdefault(b.worker, []).append(b)
        for b in claimed:
            if b.end_col is None:
                self._end(b, col, "rolled back")


def _granted_token(grant: Grant) -> str:
    """The token as the history's lines name it (its repr), from the grant's label."""
    _, hash_, token = grant.label.partition("#")  # `w0:job1#1`: worker and job have no #
    return token if hash_ else token_text(grant.claim.token)


def _waited(e: Event) -> str | None:
    """`blocked` or `cancelled` for a call's lock-wait event: its value, else its note."""
    if e.value in ("blocked", "cancelled"):
        return str(e.value)
    for said in ("blocked", "cancelled"):
        if e.note.startswith(said):  # files that say it in words only
            return said
    return None


def order(lanes: list[str]) -> list[str]:
    """Workers by first appearance, each replacement (`w1.2`) right after the one it replaces."""
    bases: list[str] = []
    for lane in lanes:
        base = lane.split(".")[0]
        if base not in bases:
            bases.append(base)

    def key(lane: str) -> tuple[int, int, str]:
        base, _, gen = lane.partition(".")
        return bases.index(base), int(gen) if gen.isdigit() else 0, lane

    return sorted(lanes, key=key)
