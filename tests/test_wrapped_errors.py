"""What the harness caused is known for what it is whatever the library made of it.

A library on a driver often answers with its own exception around the driver's: raised
from it (`raise QueueError(...) from exc`), or carrying it as `orig` (SQLAlchemy's
`DBAPIError`). A lock timeout the harness armed is then still a lock timeout: the
refusal waits for whatever held the lock, as it does for the driver's own exception,
instead of being judged at once (which accused a correct queue of refusing its late
owner while a rival's claim was still uncommitted).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import Connection

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract, opening
from leasecheck.stateful.contract import Claim, Effect
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.answers import underlying
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.story import replay


class QueueError(Exception):
    """A library's own error."""


def _chained(exc: psycopg.Error) -> QueueError:
    try:
        raise QueueError("the job could not be updated") from exc
    except QueueError as wrapped:
        return wrapped


def _carried(exc: psycopg.Error) -> QueueError:
    wrapped = QueueError(f"({type(exc).__module__}.{type(exc).__name__}) {exc}")
    wrapped.orig = exc  # type: ignore[attr-defined]
    return wrapped


def _raise_while_handling(exc: psycopg.Error) -> None:
    try:
        raise exc
    except psycopg.Error:
        raise QueueError("while handling it") from None


def test_the_error_underneath_is_found_through_the_chain_or_orig() -> None:
    timeout = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
    lock = psycopg.errors.LockNotAvailable
    assert underlying(timeout, lock) is timeout
    assert underlying(_chained(timeout), lock) is timeout
    assert underlying(_carried(timeout), lock) is timeout
    with pytest.raises(QueueError) as handled:
        _raise_while_handling(timeout)  # its cause suppressed, its context kept
    assert underlying(handled.value, lock) is timeout
    assert underlying(QueueError("its own"), lock) is None
    assert underlying(None, lock) is None
    looped = QueueError("a cycle")
    looped.__context__ = QueueError("back")
    looped.__context__.__context__ = looped
    assert underlying(looped, lock) is None


class Wrapping(ReferenceQueue):
    """The reference, answering every driver error with its own exception."""

    wrap = staticmethod(_chained)

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except psycopg.Error as exc:
            raise self.wrap(exc) from exc

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        return self._call(super().claim, conn, worker, lease)  # type: ignore[no-any-return]

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        return self._call(super().heartbeat, conn, claim, lease)  # type: ignore[no-any-return]

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        return self._call(super().complete, conn, claim, effect)  # type: ignore[no-any-return]

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        return self._call(super().fail, conn, claim, error)  # type: ignore[no-any-return]


class Carrying(Wrapping):
    """The same, carrying the driver's error as `orig` (as SQLAlchemy does)."""

    wrap = staticmethod(_carried)


@pytest.mark.parametrize("queue", [Wrapping, Carrying])
def test_a_lock_timeout_wrapped_by_the_library_is_the_harness_doing(
    queue: type[Wrapping], reference_pool: actors.Pool
) -> None:
    """The opening's takeovers under a lock timeout: the woken owner's call times out on
    the rival's uncommitted claim. Each holds; the story says the timeout was armed."""
    harness = Harness(queue=queue(), pool=reference_pool)
    harness.reset()
    told = {s.name: s for s in opening.stories(contract.capabilities(queue()), 3)}
    for then in ("complete", "fail", "heartbeat"):
        story: list[str] = []
        replay.replay(
            harness, list(told[f"takeover: {then}, rival holds, lock_timeout"].steps), story.append
        )
        assert any("QueueError" in line for line in story), story
