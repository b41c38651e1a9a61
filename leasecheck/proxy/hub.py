"""The meeting point of the loop thread and the controller's threads.

One lock guards every session's visible state, and one condition on it wakes every
waiter at each change: a wait for several sessions at once (`wait_quiet`) is then one
wait, re-checked after each change, with no event missed between a check and a wait.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from leasecheck.proxy.errors import ProxyClosed, ProxyTimeout

CLOSED = "the proxy is closed: start a new Proxy (or call start() first)"


class Hub:
    """The shared lock, its condition, and the way into the loop."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.version = 0
        """Counts changes, so a waiter can tell a change from a spurious wake-up."""
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closed = False
        self.errors: list[BaseException] = []
        self.tasks: set[asyncio.Task[None]] = set()
        """The connections' tasks (loop thread only), all ended at close."""

    def changed(self) -> None:
        """Say that some state changed; the caller holds `cond`."""
        self.version += 1
        self.cond.notify_all()

    def poke(self) -> None:
        with self.cond:
            self.changed()

    def record(self, error: BaseException) -> None:
        """Keep an unexpected error of the loop, to be read (never printed)."""
        with self.cond:
            self.errors.append(error)
            self.changed()

    def call(self, function: Callable[..., object], *args: Any) -> None:
        """Run `function(*args)` on the loop thread, soon; from any thread."""
        loop = self.loop
        if loop is None or self.closed:
            raise ProxyClosed(CLOSED)
        try:
            loop.call_soon_threadsafe(function, *args)
        except RuntimeError as exc:
            raise ProxyClosed(CLOSED) from exc

    def wait_until(
        self, predicate: Callable[[], bool], timeout: float, failure: Callable[[], str]
    ) -> None:
        """Block until `predicate()` (evaluated under the lock) holds, re-checked at each
        change; raise ProxyTimeout(`failure()`) after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                if self.closed:
                    raise ProxyClosed(CLOSED)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ProxyTimeout(failure())
                self.cond.wait(remaining)
