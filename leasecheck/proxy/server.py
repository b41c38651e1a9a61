"""The proxy: an asyncio loop on a daemon thread of its own, driven from plain threads.

The harness is synchronous and threaded; the relaying is naturally asynchronous
(every session reads both ways at once). So the loop lives on one thread and every
control operation is a synchronous call that hands work to the loop and waits, with
a timeout, on the hub's condition.

A client in this same process must not wait on the proxy inside a C call that keeps
the GIL: libpq's blocking calls as psycopg exposes them (`Connection.cancel()`,
`pq.PGconn.connect`, `PGconn.exec_*`) would stop the loop's thread and never get
their answer. psycopg's own connections wait in Python and are fine (`cancel_safe()`
for a cancel); a client of another language runs in a process of its own anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any, TypeVar

from leasecheck.proxy.endpoint import Endpoint
from leasecheck.proxy.errors import ProxyClosed, ProxyError, ProxyTimeout
from leasecheck.proxy.hub import CLOSED, Hub
from leasecheck.proxy.locks import LockWatch
from leasecheck.proxy.session import DEFAULT_TIMEOUT, Snapshot
from leasecheck.proxy.upstream import Upstream

T = TypeVar("T")
QUIET = frozenset(("held", "idle", "closed", "blocked"))
LOCK_POLL = 0.02
"""Seconds between two looks at `pg_blocking_pids` while a session runs unblocked.

A lock wait shows nothing on the wire, so no event announces it: while a session
runs, `wait_quiet` asks the server again after each change of state or after this
interval, whichever is first (as PostgreSQL's isolationtester and the harness's own
`Pool.blocked` do). It only bounds how soon a lock wait is seen, never what is seen.
"""


class Proxy:
    """A stepping proxy to one PostgreSQL server, with named endpoints."""

    def __init__(self, upstream: str | tuple[str, int], *, control_dsn: str | None = None):
        self.upstream = Upstream.parse(upstream)
        self._hub = Hub()
        self._locks = LockWatch(control_dsn or (upstream if isinstance(upstream, str) else None))
        self._endpoints: dict[str, Endpoint] = {}
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<Proxy to {self.upstream}, endpoints {sorted(self._endpoints)}>"

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def errors(self) -> list[BaseException]:
        """Unexpected errors inside the loop (proxy defects), kept instead of printed."""
        with self._hub.cond:
            return list(self._hub.errors)

    def start(self) -> Proxy:
        if self._thread is not None:
            raise ProxyError("this proxy was started already: start() once per Proxy")
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(self._unhandled)
        self._hub.loop = loop
        self._thread = threading.Thread(
            target=self._run, args=(loop,), name="leasecheck-proxy", daemon=True
        )
        self._thread.start()
        return self

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    def _unhandled(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        self._hub.record(error if error is not None else ProxyError(str(context["message"])))

    def _call(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run `coroutine` on the loop and wait for its result."""
        loop = self._hub.loop
        if loop is None or self._hub.closed:
            coroutine.close()
            raise ProxyClosed(CLOSED)
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout)
        except TimeoutError as exc:
            future.cancel()
            raise ProxyTimeout(
                f"the proxy's loop did not answer within {timeout}s: is it stuck? "
                "(see proxy.errors)"
            ) from exc

    def endpoint(self, name: str, timeout: float = DEFAULT_TIMEOUT) -> Endpoint:
        """Return the endpoint `name`, listening on a port of its own (opened once)."""
        with self._hub.cond:
            found = self._endpoints.get(name)
        if found is not None:
            return found
        endpoint = Endpoint(self._hub, name, self.upstream)
        self._call(endpoint.listen(), timeout)
        with self._hub.cond:
            self._endpoints[name] = endpoint
        return endpoint

    def drop(self, name: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Stop listening on the endpoint `name` and forget it; its sessions end with it
        (a long run opens an endpoint per connection, and drops each with its connection)."""
        with self._hub.cond:
            endpoint = self._endpoints.pop(name, None)
            closed = self._hub.closed
        if endpoint is not None and not closed:  # a closed proxy listens no more
            self._call(self._drop(endpoint), timeout)

    async def _drop(self, endpoint: Endpoint) -> None:
        endpoint.stop_accepting()
        sessions = endpoint.all_sessions()
        for session in sessions:
            session._finish("its endpoint was dropped")
        await asyncio.gather(*(s.task for s in sessions), return_exceptions=True)
        await endpoint.stop_listening()

    @property
    def endpoints(self) -> list[Endpoint]:
        with self._hub.cond:
            return list(self._endpoints.values())

    def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float = DEFAULT_TIMEOUT,
        waiting_for: str = "a condition",
    ) -> None:
        """Block until `predicate()` holds, re-evaluated at every change of any session
        (and at every `poke()`, for conditions of the caller's own)."""
        self._hub.wait_until(
            predicate,
            timeout,
            lambda: (
                f"{waiting_for} did not come within {timeout}s: raise the timeout "
                "or check that the clients connect through this proxy's endpoints"
            ),
        )

    def poke(self) -> None:
        """Wake every `wait_until`, so that it re-checks a condition outside the proxy."""
        self._hub.poke()

    def wait_quiet(
        self, names: Iterable[str] | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> list[Snapshot]:
        """Block until every session of the endpoints `names` (all when None) is quiet:
        held at its gate, idle, closed, or running but blocked on a lock. Return their
        snapshots, state "blocked" with the pids they wait for; closed sessions are
        included until their endpoint forgets them."""
        chosen = self._chosen(names)
        deadline = time.monotonic() + timeout
        while True:
            with self._hub.cond:
                version = self._hub.version
                snapshots = [s.snapshot() for e in chosen for s in e.all_sessions()]
            found = self._with_locks(snapshots)
            waiting = [s for s in found if s.state not in QUIET]
            if not waiting:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProxyTimeout(
                    f"wait_quiet: after {timeout}s still busy and not blocked on a lock: "
                    + "; ".join(_shown(s) for s in waiting)
                    + ": release what they wait for, or raise the timeout"
                )
            running = any(s.state == "running" for s in waiting)
            with self._hub.cond:
                if self._hub.closed:
                    raise ProxyClosed(CLOSED)
                if self._hub.version == version:
                    self._hub.cond.wait(min(LOCK_POLL, remaining) if running else remaining)

    def _chosen(self, names: Iterable[str] | None) -> list[Endpoint]:
        with self._hub.cond:
            if names is None:
                return list(self._endpoints.values())
            wanted = list(names)
            unknown = [n for n in wanted if n not in self._endpoints]
            if unknown:
                raise ProxyError(
                    f"no endpoint named {', '.join(map(repr, unknown))}: open it first "
                    f"with proxy.endpoint(name) (open: {sorted(self._endpoints)})"
                )
            return [self._endpoints[n] for n in wanted]

    def _with_locks(self, snapshots: list[Snapshot]) -> list[Snapshot]:
        pids = [s.backend_pid for s in snapshots if s.state == "running" and s.backend_pid]
        blocked = self._locks.blocked([p for p in pids if p is not None])
        return [
            dataclasses.replace(s, state="blocked", blocked_by=blocked[s.backend_pid])
            if s.state == "running" and s.backend_pid in blocked
            else s
            for s in snapshots
        ]

    def close(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Close every socket (listening, client, server) and end the loop's thread."""
        thread, loop = self._thread, self._hub.loop
        if thread is None or loop is None or self._hub.closed:
            self._locks.close()
            return
        try:
            self._call(self._shutdown(), timeout)
        finally:
            with self._hub.cond:
                self._hub.closed = True
                self._hub.changed()
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)
            self._locks.close()
        if thread.is_alive():
            raise ProxyTimeout(f"the proxy's thread did not end within {timeout}s")

    async def _shutdown(self) -> None:
        for endpoint in self.endpoints:
            endpoint.stop_accepting()
        relaying = set()
        for endpoint in self.endpoints:
            for session in endpoint.all_sessions():
                session._finish("the proxy closed")
                relaying.add(session.task)
        for task in self._hub.tasks - relaying:
            task.cancel()
        await asyncio.gather(*self._hub.tasks, return_exceptions=True)
        for endpoint in self.endpoints:
            await endpoint.stop_listening()
        current = asyncio.current_task()
        others = [t for t in asyncio.all_tasks() if t is not current]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)


def _shown(snapshot: Snapshot) -> str:
    statement = snapshot.statement or "?"
    if len(statement) > 60:
        statement = statement[:57] + "..."
    return f"{snapshot.session.label} (pid {snapshot.backend_pid}, {snapshot.state}: {statement!r})"
