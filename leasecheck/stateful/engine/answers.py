"""What a call ended in, and the one reader that turns it into something to judge.

Every call the driver sends ends in exactly one `Outcome`: the queue `Answered` (its
return value), the queue `Raised` (its own exception, on a live connection), the
outcome was `Lost` (the connection died under the call: it may or may not have
committed), or the harness `Ended` it (cancelled it, cut it, chose it as a deadlock's
victim). Only the first two are the queue's; the reader below treats them alike for
every call kind, as the contract (docs/contract.md) says: an exception is the queue's answer
"no" (as a worker treats a failed renewal: the lease is gone), quoted in the story;
an answer of the wrong type is a contract error that names the method and what it
returned. What the harness caused is never judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from leasecheck.stateful.contract import Claim, ContractError, as_claim

E = TypeVar("E", bound=BaseException)


def underlying(error: BaseException | None, kind: type[E]) -> E | None:
    """Return the `kind` error that `error` is or wraps, else None.

    A library may answer with its own exception around the driver's: raised from it or
    while handling it (`__cause__`, `__context__`), or carrying it as `orig`, as
    SQLAlchemy's `DBAPIError` does. A lock timeout or a serialization failure the
    harness brought about is known for what it is whatever the library made of it."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, kind):
            return error
        seen.add(id(error))
        orig = getattr(error, "orig", None)
        error = orig if isinstance(orig, BaseException) else error.__cause__ or error.__context__
    return None


@dataclass(frozen=True)
class Answered:
    """The call returned `value`."""

    value: Any


@dataclass(frozen=True)
class Raised:
    """The queue raised `error` on a live connection: its answer, a "no"."""

    error: BaseException

    @property
    def quote(self) -> str:
        """Return the exception as the story quotes it: its type and first line."""
        first = str(self.error).strip().splitlines()
        text = f"{type(self.error).__name__}: {first[0]}" if first else type(self.error).__name__
        return text[:160]


@dataclass(frozen=True)
class Lost:
    """The connection died under the call: whether it committed is unknown.

    `error` is what the call raised, or None when the library swallowed the death of
    its connection and returned anyway: a session the harness ended answers nothing
    the queue said, whatever the library made of it.
    """

    error: BaseException | None
    returned: Any = None
    """What the library returned regardless, when `error` is None (for the story)."""

    @property
    def note(self) -> str:
        """Say what the call ended in, for the history."""
        if self.error is not None:
            return " ".join(str(self.error).split())[:120]
        shown = " ".join(repr(self.returned).split())[:60]
        return f"its session was ended by the harness; the library returned {shown} anyway"


@dataclass(frozen=True)
class Ended:
    """The harness ended the call (cancel, cut, deadlock victim): never the queue's doing."""

    why: str


Outcome = Answered | Raised | Lost | Ended


@dataclass(frozen=True)
class YesNo:
    """A yes/no call read: `judged` False when the answer is unknown or not the queue's."""

    judged: bool
    yes: bool = False
    raised: str | None = None
    """The quoted exception, when the "no" was one."""


UNKNOWN = YesNo(judged=False)


def yes_no(queue: str, call: str, outcome: Outcome) -> YesNo:
    """Read the answer of a heartbeat, completion or failure report.

    Raise `ContractError` for an answer that is not a bool: a queue that answers
    None or 1 has not said yes or no, and guessing would judge it on our reading.
    """
    if isinstance(outcome, Raised):
        return YesNo(judged=True, yes=False, raised=outcome.quote)
    if not isinstance(outcome, Answered):
        return UNKNOWN
    if not isinstance(outcome.value, bool):
        raise ContractError(
            f"{queue}: {call}() returned {_shown(outcome.value)}; return True or False "
            f"(whether it {_MEANS[call]})"
        )
    return YesNo(judged=True, yes=outcome.value)


_MEANS = {
    "heartbeat": "still owned the job and moved its lease; a heartbeat that answers "
    "nothing declares heartbeat_answers = False",
    "complete": "accepted the completion",
    "fail": "accepted the failure report",
    "complete_many": "accepted that claim's completion",
}


def claim(queue: str, outcome: Outcome) -> Any | None:
    """Read a claim's answer: the queue's claim object, or None for nothing handed out.

    An exception is "nothing for you" (the story quotes it); an answer that is not a
    claim is a contract error.
    """
    if not isinstance(outcome, Answered) or outcome.value is None:
        return None
    checked(queue, "claim", outcome.value)
    return outcome.value


def claims(queue: str, outcome: Outcome) -> list[Any]:
    """Read `claim_many`'s answer: a list (or tuple) of claims, possibly empty."""
    if not isinstance(outcome, Answered):
        return []
    if not isinstance(outcome.value, (list, tuple)):
        raise ContractError(
            f"{queue}: claim_many() returned {_shown(outcome.value)}; return a list of claims "
            "(empty when nothing is handed out)"
        )
    for raw in outcome.value:
        checked(queue, "claim_many", raw)
    return list(outcome.value)


def answers(queue: str, outcome: Outcome, count: int) -> list[YesNo]:
    """Read `complete_many`'s answer: one yes/no per claim, in order."""
    if not isinstance(outcome, Answered):
        return [yes_no(queue, "complete_many", outcome)] * count
    values = outcome.value
    if not isinstance(values, (list, tuple)) or len(values) != count:
        raise ContractError(
            f"{queue}: complete_many() returned {_shown(values)} for {count} claims; answer "
            "a list of one True or False per claim, in order"
        )
    return [yes_no(queue, "complete_many", Answered(v)) for v in values]


def checked(queue: str, call: str, raw: Any) -> Claim:
    """Return the harness's reading of a claim object, or raise a contract error naming `call`."""
    try:
        return as_claim(raw)
    except ContractError:
        raise ContractError(
            f"{queue}: {call}() returned {_shown(raw)}; return None, an object with job_id, "
            "token and worker attributes, or a (job_id, token, worker) tuple"
        ) from None


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}..." if len(text) > 60 else text


Done = Callable[[Outcome, int], None]
"""What the driver calls with a call's outcome and the simulated time it was sent."""
