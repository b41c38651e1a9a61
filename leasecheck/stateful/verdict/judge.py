"""One judge, fed by facts: every verdict comes from what the history records.

The machine never tells the oracle anything directly. It hands each committed
answer to the judge, which writes it down as a fact (plain values only) and only
then lets the oracle judge that fact. So the facts a failing run saves are all
the oracle ever saw, and `rejudge` can judge a saved history again: with today's
oracle, after a fix to it, or to read its lease intervals for a picture.

What the queue's `state()` answered while the oracle judged is a fact too, so a
history is judged again without the queue or its database.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from leasecheck.stateful.contract import Claim, JobId
from leasecheck.stateful.verdict import hidden
from leasecheck.stateful.verdict.grants import Grant
from leasecheck.stateful.verdict.model import Observe, Oracle


@dataclass(frozen=True)
class Rules:
    """What the oracle must know about the queue, saved beside the facts."""

    lease: int
    max_attempts: int | None
    ordered_tokens: bool
    revokes_expired: bool = False
    max_failures: int | None = None
    """The failure reports after which the queue gives a job up (None: no such cap)."""
    answers_complete: bool = False
    observes: bool = False
    """Whether the queue has `state()`; without it, what needs it goes unjudged."""
    heartbeat_answers: bool | None = None
    """False for a fire-and-forget heartbeat: nothing is judged from it (the picture draws
    it as sent). None in files saved before it was recorded: the picture infers it."""
    renews_worker: bool = False
    """One accepted heartbeat renews every claim of its worker whose lease still runs
    (`heartbeat_renews = "worker"`, `stateful.verdict.renewals`)."""


@dataclass(frozen=True)
class Fact:
    """One input of the oracle: `op` names the oracle's method, `args` its arguments."""

    op: str
    args: dict[str, Any]


def token_value(token: Hashable) -> Any:
    """Return a token as a plain value that compares as the token does.

    Numbers and strings stay as they are, a decimal becomes a number, a timestamp a
    fixed-width string (so it still sorts by time), tuples become lists (ordered the
    same way), anything else its repr (equal when equal, and never ordered).
    """
    if token is None or isinstance(token, (bool, int, float, str)):
        return token
    if isinstance(token, Decimal):
        return int(token) if token == token.to_integral_value() else float(token)
    if isinstance(token, datetime):
        if token.tzinfo is not None:
            return token.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return token.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(token, (tuple, list)):
        return [token_value(t) for t in token]
    return repr(token)


class _Token(list[Any]):
    """A token read back from a fact: a list that hashes, as claims need."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(repr(self))


def _read_token(value: Any) -> Hashable:
    if isinstance(value, list):
        return _Token(_read_token(v) for v in value)
    return value  # type: ignore[no-any-return]


@dataclass
class Judge:
    """Writes each answer down as a fact, then has the oracle judge it."""

    rules: Rules
    observe: Observe | None = None
    """The queue's `state()` (live), or None when judging again from facts."""
    facts: list[Fact] = field(default_factory=list)
    grants: list[Grant] = field(default_factory=list)
    oracle: Oracle = field(init=False)
    events: list[int | None] = field(default_factory=list)
    """For each grant, the history event (seq) that answered the claim, if known."""
    _told: deque[Fact] = field(default_factory=deque)
    """When judging again: the states recorded after the fact being judged."""
    _taken: bool = False

    def __post_init__(self) -> None:
        r = self.rules
        self.oracle = Oracle(
            lease=r.lease,
            max_attempts=r.max_attempts,
            max_failures=r.max_failures,
            ordered_tokens=r.ordered_tokens,
            revokes_expired=r.revokes_expired,
            answers_complete=r.answers_complete,
            renews_worker=r.renews_worker,
            observe=self._state if r.observes else None,
        )

    # ------------------------------------------------------------- the facts

    def enqueued(self, job_id: JobId, label: str) -> None:
        self._judge(Fact("enqueued", {"job_id": job_id, "label": label}))

    def grant(
        self,
        claim: Claim,
        label: str,
        at: int,
        key: str,
        event: int | None = None,
        sent: int | None = None,
        answered_at: int | None = None,
        lease_from: int | None = None,
    ) -> Grant:
        """Judge a committed claim; `event` is the history line that answered it, `sent`
        the claim call's own line when it answered after being in flight, and
        `answered_at` the simulated time of that answer (it took the job between `at`
        and then); `lease_from` the instant its `now()` read, if not `at`."""
        args = {
            "job_id": claim.job_id,
            "token": token_value(claim.token),
            "worker": claim.worker,
            "label": label,
            "at": at,
            "key": key,
            "event": event,
        }
        if sent is not None:
            args["sent"] = sent
        if answered_at is not None:
            args["answered_at"] = answered_at
        if lease_from is not None and lease_from != at:
            args["lease_from"] = lease_from
        self._judge(Fact("grant", args))
        return self.grants[-1]

    def answer(
        self,
        op: str,
        grant: Grant,
        accepted: bool,
        at: int,
        answered: int | None = None,
        raised: str | None = None,
        lease_from: int | None = None,
    ) -> None:
        """Judge a heartbeat, completion or failure report (`op`) of `grant`.

        `at`: when the call was sent; `answered`: when its answer came (later if it
        waited); `raised`: the quoted exception when the "no" was one; `lease_from`: the
        instant a heartbeat's `now()` read, if not `at` (inside a held transaction).
        """
        args: dict[str, Any] = {"grant": self.grants.index(grant), "accepted": accepted, "at": at}
        args["answered"] = at if answered is None else answered
        if raised is not None:
            args["raised"] = raised
        if lease_from is not None and lease_from != at:
            args["lease_from"] = lease_from
        self._judge(Fact(op, args))

    def heartbeat(self, grant: Grant, accepted: bool, at: int, answered: int | None = None) -> None:
        self.answer("heartbeat", grant, accepted, at, answered)

    def complete(self, grant: Grant, accepted: bool, at: int, answered: int | None = None) -> None:
        self.answer("complete", grant, accepted, at, answered)

    def fail(self, grant: Grant, accepted: bool, at: int, answered: int | None = None) -> None:
        self.answer("fail", grant, accepted, at, answered)

    def releasing(self, grant: Grant, op: str, at: int) -> None:
        """`grant`'s completion or failure report (`op`), sent at `at`, is in flight: it may
        give the job back before it answers."""
        self._judge(Fact("releasing", {"grant": self.grants.index(grant), "op": op, "at": at}))

    def release_unknown(self, grant: Grant, op: str, at: int) -> None:
        """`grant`'s completion or failure report, sent at `at`, lost its answer: it may
        have given the job back at any moment since."""
        args = {"grant": self.grants.index(grant), "op": op, "at": at}
        self._judge(Fact("release_unknown", args))

    def claim_sent(self, call: int) -> None:
        """A claim call is in flight (paused or blocked): late owners wait for its answer."""
        self._judge(Fact("claim_sent", {"call": call}))

    def claim_answered(self, call: int, jobs: list[JobId], known: bool) -> None:
        """The claim call in flight answered, handing out `jobs` (unknown if lost)."""
        self._judge(Fact("claim_answered", {"call": call, "jobs": jobs, "known": known}))

    def situation(self, name: str) -> None:
        """Count a situation only the driver sees (a paused call, a blocked one, ...)."""
        self._judge(Fact("situation", {"name": name}))

    def raised(self, call: str, at: int, quote: str) -> None:
        """Note what the queue raised where no grant was at stake (a claim)."""
        self._judge(Fact("raised", {"call": call, "at": at, "quote": quote}))

    def external_effect(self, grant: Grant, key: str) -> bool:
        """Deliver an effect to the oracle's deduplicating receiver; return whether it took it."""
        self._judge(Fact("external_effect", {"grant": self.grants.index(grant), "key": key}))
        return self._taken

    def effect_rows(
        self, rows: list[tuple[int, str, str, str]], refused: set[int], voided: set[int]
    ) -> None:
        self._judge(
            Fact(
                "effect_rows",
                {
                    "rows": [list(r) for r in rows],
                    "refused": sorted(refused),
                    "voided": sorted(voided),
                },
            )
        )

    def claims_settled(self, unknown: bool) -> None:
        """A step in which a claim answered is over: judge what state() shows running
        (no-hidden-claims); `unknown`: a claim's outcome was left unknown meanwhile."""
        self._judge(Fact("claims_settled", {"unknown": unknown}))

    def effect_held_back(self, job_id: JobId) -> None:
        """The machine held back a body's effect: its claim had not committed (done-effect)."""
        self._judge(Fact("effect_held_back", {"job_id": job_id}))

    def drained(self) -> None:
        """Judge no-lost-jobs after the drain, from the queue's state (recorded as facts)."""
        self._judge(Fact("drained", {}))

    # ------------------------------------------------------------- judging

    def _judge(self, fact: Fact) -> None:
        self.facts.append(fact)
        apply: Callable[..., Any] = getattr(self, f"_apply_{fact.op}")
        apply(**fact.args)

    def _apply_enqueued(self, job_id: JobId, label: str) -> None:
        self.oracle.enqueued(job_id, label)

    def _apply_grant(
        self,
        job_id: JobId,
        token: Any,
        worker: str,
        label: str,
        at: int,
        key: str,
        event: int | None,
        sent: int | None = None,
        answered_at: int | None = None,
        lease_from: int | None = None,
    ) -> None:
        claim = Claim(job_id=job_id, token=_read_token(token), worker=worker)
        grant = self.oracle.grant(claim, label, at, key, sent, answered_at, lease_from)
        self.grants.append(grant)
        self.events.append(event)

    def grant_of(self, event: int) -> Grant | None:
        """Return the grant the history line `event` handed out, if it was ever committed."""
        try:
            return self.grants[self.events.index(event)]
        except ValueError:
            return None

    def _apply_call(
        self,
        op: str,
        grant: int,
        accepted: bool,
        at: int,
        answered: int | None = None,
        raised: str | None = None,
        lease_from: int | None = None,
    ) -> None:
        """Judge a heartbeat, completion or failure report (`op`, the oracle's method)."""
        judge = getattr(self.oracle, op)
        if lease_from is not None:  # a heartbeat's only
            judge(self.grants[grant], accepted, at, answered, raised, lease_from)
        else:
            judge(self.grants[grant], accepted, at, answered, raised)

    def _apply_heartbeat(self, **args: Any) -> None:
        self._apply_call("heartbeat", **args)

    def _apply_complete(self, **args: Any) -> None:
        self._apply_call("complete", **args)

    def _apply_fail(self, **args: Any) -> None:
        self._apply_call("fail", **args)

    def _apply_releasing(self, grant: int, op: str, at: int) -> None:
        self.oracle.releasing(self.grants[grant], op, at)

    def _apply_release_unknown(self, grant: int, op: str, at: int) -> None:
        self.oracle.release_unknown(self.grants[grant], op, at)

    def _apply_claim_sent(self, call: int) -> None:
        self.oracle.claim_sent(call)

    def _apply_claim_answered(self, call: int, jobs: list[JobId], known: bool) -> None:
        self.oracle.claim_answered(call, jobs, known)

    def _apply_situation(self, name: str) -> None:
        self.oracle.ledger.saw(name)

    def _apply_raised(self, call: str, at: int, quote: str) -> None:
        self.oracle.ledger.answer_raised(call, at, quote)

    def _apply_external_effect(self, grant: int, key: str) -> None:
        self._taken = self.oracle.external_effect(self.grants[grant], key)

    def _apply_effect_rows(
        self, rows: list[list[Any]], refused: list[int], voided: list[int]
    ) -> None:
        self.oracle.effect_rows(
            [(int(c), str(j), str(t), str(w)) for c, j, t, w in rows], set(refused), set(voided)
        )

    def _apply_claims_settled(self, unknown: bool) -> None:
        self.oracle.ledger.take(hidden.judge(self.oracle, self.oracle.doubts, unknown))

    def _apply_effect_held_back(self, job_id: JobId) -> None:
        self.oracle.effects.held_back.add(job_id)

    def _apply_drained(self) -> None:
        self.oracle.drained()

    def _apply_state(self, job_id: JobId, status: str) -> None:
        """A state answer is read while another fact is judged, never judged by itself."""

    def _state(self, job_id: JobId) -> str:
        """What the queue's `state()` answers: asked live and written down, or read back."""
        if self.observe is not None:
            status = self.observe(job_id)
            self.facts.append(Fact("state", {"job_id": job_id, "status": status}))
            return status
        if not self._told or self._told[0].args["job_id"] != job_id:
            raise ValueError(
                f"the saved facts do not say what state() answered for job {job_id!r} here; "
                "the history was judged by another oracle: run the queue again"
            )
        told = self._told.popleft()
        self.facts.append(told)
        return str(told.args["status"])

    def to_json(self) -> dict[str, Any]:
        return {"rules": asdict(self.rules), "facts": [asdict(f) for f in self.facts]}


def rejudge(saved: dict[str, Any]) -> Judge:
    """Judge saved facts again (`Judge.to_json`'s form) and return the judge that did."""
    try:
        rules = Rules(**saved["rules"])
        facts = [Fact(op=f["op"], args=f["args"]) for f in saved["facts"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(
            f"not a judge's record of facts ({exc}); it needs rules and facts"
        ) from None
    judge = Judge(rules)
    for i, fact in enumerate(facts):
        if fact.op == "state":
            continue  # read back by the fact before it
        if not hasattr(judge, f"_apply_{fact.op}"):
            raise ValueError(f"fact {i} is {fact.op!r}, which this oracle does not know")
        states = itertools.takewhile(lambda f: f.op == "state", facts[i + 1 :])
        judge._told = deque(states)
        try:
            judge._judge(fact)
        except TypeError as exc:  # arguments this oracle does not take: another version's
            raise ValueError(f"fact {i} ({fact.op}) does not fit this oracle: {exc}") from None
        if judge._told:
            raise ValueError(
                f"fact {i} ({fact.op}) was judged without reading every state() answer "
                "recorded for it: the history was judged by another oracle"
            )
    return judge
