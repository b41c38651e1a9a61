"""Sessions: one connection and one thread each, and the pool that lends them.

A session's backend can be asked what it waits on (`Pool.blocked`, through
`pg_blocking_pids`, as PostgreSQL's isolation tester does), ended from the server side
(`Pool.terminate`), and cleaned between examples. A call that goes on past the safety
timeout after its statement was cancelled (a library's retry or reconnect loop) is ended
with `CallHung`, raised inside its thread: no run hangs. How a call is sent on a session
and waited for is `stateful.engine.sending`; how a queue's own client lives on a
session, `stateful.engine.client_sessions`. This module knows nothing of queues or
properties.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import Connection

from leasecheck.proxy import Endpoint, Proxy
from leasecheck.stateful import clock
from leasecheck.stateful.clock import QUERIES
from leasecheck.stateful.contract import Clients
from leasecheck.stateful.engine import client_sessions
from leasecheck.stateful.engine.ending import GRACE, ending, hung, quiet_psycopg, raise_in
from leasecheck.stateful.engine.ending import CallHung as CallHung
from leasecheck.stateful.engine.ending import Stuck as Stuck
from leasecheck.stateful.engine.gates import GatedConnection
from leasecheck.stateful.engine.session import Session as Session

SAFETY_TIMEOUT = 30.0
SPARES = 2
"""Connections kept open ahead of need, for the workers that crashes and cuts replace."""
FIRST_LOOK = 0.0002
"""Seconds before `settle` first asks whether a call finished or waits on a lock."""

_ENDPOINTS = itertools.count(1)
"""Names the proxy's endpoints of the harness's sessions opened through it."""


@dataclass
class Pool:
    """Connections kept across examples, and the monitor that watches them.

    Opening a connection costs more than a whole step, so sessions are handed back
    here in a clean state at the end of an example and reused by the next one. A
    crash or a cut ends a backend for good; its replacement comes from a few spare
    connections opened ahead of time on a thread of their own (the profile's top cost
    was connecting inside the crash step).
    """

    dsn: str
    deadline: float = SAFETY_TIMEOUT
    """Seconds a call may neither finish nor wait on a held transaction before its
    statement is cancelled and the run stops (`Stuck`, then `CallHung`)."""
    monitor: Connection[Any] = field(init=False)
    _free: list[Session] = field(default_factory=list)
    _out: list[Session] = field(default_factory=list)
    """Sessions handed out and not taken back: what `close` still ends."""
    _count: int = 0
    _spares: list[Future[Connection[Any]]] = field(default_factory=list)
    _opener: ThreadPoolExecutor = field(init=False)
    _inline: tuple[Session, float] | None = None
    """The session running a call on the machine's thread, and when that call is stuck."""
    _hung: Session | None = None
    """The session whose inline call the watchdog ended with CallHung."""
    _fired: Session | None = None
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)
    _watchdog: threading.Thread | None = None
    _settings: str = ""
    """The harness's session settings this role may make (see `_connect`)."""
    proxy: Proxy | None = None
    """A stepping proxy to open every session through, each on an endpoint of its own:
    its calls are then preempted where the wire shows a round trip, not where psycopg
    sends one (the same points for a psycopg client, which a test holds equal)."""
    _endpoints: dict[int, Endpoint] = field(default_factory=dict)
    """The endpoint of each connection opened through the proxy, by the connection's id."""
    clients: Clients | None = None
    """A queue that opens its own connections: each session is then one of its clients,
    on an endpoint of its own of `proxy` (the pool starts one, and closes it, if none is
    given); the harness's connections go straight to the server."""
    _own_proxy: bool = False

    def __post_init__(self) -> None:
        quiet_psycopg()
        self.monitor = clock.connect(self.dsn)
        self._opener = ThreadPoolExecutor(1, thread_name_prefix="leasecheck-opener")
        if self.clients is not None and self.proxy is None:
            self.proxy = Proxy(self.dsn).start()
            self._own_proxy = True

    def run_inline(self, session: Session, call: Callable[[Connection[Any]], Any]) -> Future[Any]:
        """Run `call(conn)` on this thread; return it as a finished future.

        A watchdog cancels the statement after the safety timeout, so a call that
        waits on something outside the harness (a session-level advisory lock, say)
        ends in `Stuck`, as it would on the session's own thread.
        """
        if self._watchdog is None:
            self._watchdog = threading.Thread(
                target=self._watch, name="leasecheck-watchdog", daemon=True
            )
            self._watchdog.start()
        future: Future[Any] = Future()
        session.thread = threading.get_ident()
        self._inline = (session, time.monotonic() + self.deadline)
        try:
            future.set_result(call(session.target))
        except Exception as exc:
            future.set_exception(exc)
        except CallHung:
            with contextlib.suppress(psycopg.Error, Stuck):  # its backend may still be busy
                self.terminate(session)
            session.terminated = True  # wherever the library was, its connection is done
            raise CallHung(hung(session.label, session.what, self.deadline)) from None
        finally:
            with self._guard:
                self._inline = None
                fired, self._fired = self._fired is session, None
                ended, self._hung = self._hung is session, None
        if ended:  # raised as the call returned: it ran past its deadline all the same
            raise CallHung(hung(session.label, session.what, self.deadline))
        if fired:
            raise Stuck(
                f"{session.label}'s call neither finished nor waited on a held transaction "
                f"within {self.deadline:g} s; its statement was cancelled"
            )
        return future

    def _watch(self) -> None:
        """Cancel the statement of an inline call past its deadline; if the call still has
        not returned `GRACE` seconds later, end it with CallHung in its thread."""
        while not self._closing.wait(min(1.0, self.deadline / 4)):
            with self._guard:
                running = self._inline
                if running is None or time.monotonic() <= running[1]:
                    continue
                session = running[0]
                if self._fired is not session:
                    self._fired = session
                    self._cancel_quietly(session)
                elif time.monotonic() > running[1] + GRACE and self._hung is not session:
                    self._hung = session
                    if session.thread is not None:
                        raise_in(session.thread)
                    self._cancel_quietly(session)  # back to Python, where it lands

    def _cancel_quietly(self, session: Session) -> None:
        """Cancel what the session's backends run, if they still run (on any thread)."""
        with contextlib.suppress(psycopg.Error):  # a dead backend runs nothing
            if session.client is None:
                session.conn.cancel_safe()
            else:  # the monitor is the machine's: a connection of its own, on this thread
                with clock.connect(self.dsn) as conn:
                    conn.execute(_CANCEL, (sorted(session.pids),))

    def _connect(self) -> Connection[Any]:
        if self.proxy is None or self.clients is not None:
            conn = clock.connect(self.dsn, GatedConnection)
        else:
            endpoint = self.proxy.endpoint(f"session-{next(_ENDPOINTS)}")
            conn = clock.connect(endpoint.dsn(self.dsn), GatedConnection)
            self._endpoints[id(conn)] = endpoint
        try:
            conn.execute(_DEADLOCK_TIMEOUT)
            self._settings = _DEADLOCK_TIMEOUT
        except psycopg.errors.InsufficientPrivilege:
            self._settings = ""  # not a superuser: PostgreSQL's own check stays on
        return conn

    def _spare(self) -> Connection[Any]:
        """Return a connection opened ahead of time if one is ready, else open one now."""
        ready = next((f for f in self._spares if f.done()), None)
        conn = None
        if ready is not None:
            self._spares.remove(ready)
            if ready.exception() is None:
                conn = ready.result()
        while len(self._spares) < SPARES:
            self._spares.append(self._opener.submit(self._connect))
        return conn if conn is not None else self._connect()

    def open(self, label: str) -> Session:
        """Return a clean, idle session (reused when one is free; a queue's client on it
        is opened anew, at the session's first call: `ready`)."""
        if self._free:
            session = self._free.pop()
            session.label = label
            session.used = False
            session.times_out = False
            session.gate = None  # the last example's, if its last call was gated
            if session.endpoint is not None:
                session.endpoint.stepped = False
        elif self.clients is not None:
            session = self._open_client(label)
        else:
            self._count += 1
            executor = ThreadPoolExecutor(1, thread_name_prefix=f"leasecheck-{self._count}")
            conn = self._spare()
            endpoint = self._endpoints.pop(id(conn), None)
            session = Session(label=label, conn=conn, executor=executor, endpoint=endpoint)
        self._out.append(session)
        return session

    def _open_client(self, label: str) -> Session:
        """Return a session for a client of the queue's, on an endpoint of the proxy of
        its own; the client is opened when the session's first call goes (`ready`)."""
        assert self.clients is not None and self.proxy is not None
        self._count += 1
        executor = ThreadPoolExecutor(1, thread_name_prefix=f"leasecheck-{self._count}")
        at = client_sessions.endpoint(self.proxy)
        return Session(label=label, conn=self._spare(), executor=executor, endpoint=at)

    def ready(self, session: Session) -> None:
        """Make the session ready for a call of the queue's: open its client, when the
        queue opens its own connections (`client_sessions.ready`)."""
        if self.clients is not None:
            client_sessions.ready(session, self.clients, self.dsn, bool(self._settings))

    def _disconnect_client(self, session: Session) -> None:
        if self.clients is not None:
            client_sessions.disconnect(session, self.clients)

    def release(self, session: Session) -> None:
        """Take a session back: broken ones are closed, healthy ones rolled back and kept."""
        self._out = [s for s in self._out if s is not session]
        if session.pending is not None and not session.pending.done():
            self.terminate(session)
        if session.client is not None and not session.broken:
            # A queue's client is never handed to another example: what its connections
            # remember (psycopg prepares a statement at its fifth run, in a round trip of
            # its own) would make a program's round trips depend on the examples before.
            # The session (its endpoint, the harness's connection) is kept, and gets a
            # new client when it is handed out again.
            in_transaction = session.in_transaction
            self._disconnect_client(session)
            assert self.proxy is not None
            if in_transaction or not client_sessions.all_closed(session, self.proxy):
                self.discard(session)
                return
        if session.broken:
            self.discard(session)
            return
        if session.in_transaction:
            session.conn.rollback()
        if session.used and session.client is None:
            clean(session.conn, self._settings)
        session.pending = None
        self._free.append(session)

    def discard(self, session: Session) -> None:
        """Close a session for good; a call of it that goes on regardless is ended."""
        self._disconnect_client(session)
        session.conn.close()
        if session.endpoint is not None and self.proxy is not None:
            self.proxy.drop(session.endpoint.name)
        pending = session.pending
        if pending is not None and not pending.done():
            wait_futures([pending], timeout=GRACE)
            if not pending.done() and session.thread is not None:
                raise_in(session.thread)
                wait_futures([pending], timeout=GRACE)
        session.executor.shutdown(wait=pending is None or pending.done())

    def terminate(self, session: Session) -> None:
        """End the session's backends from the server side and wait until they are gone.

        A queue's client dies as its process would: its endpoint is dropped first, so
        it cannot reconnect, and nothing it sends from then on reaches the server."""
        if not session.broken:
            pids = sorted(session.pids)
            ending(session.conn)
            if session.client is not None and session.endpoint is not None:
                assert self.proxy is not None
                self.proxy.drop(session.endpoint.name)
            self.monitor.execute(_TERMINATE, (pids,))
            # Locks go before the activity entry does, so once the pid is gone
            # from pg_stat_activity everything it held is released.
            gone = "select not exists (select from pg_stat_activity where pid = any(%s))"
            deadline = time.monotonic() + self.deadline
            while not self.monitor.execute(gone, (pids,)).fetchone()[0]:  # type: ignore[index]
                if time.monotonic() > deadline:
                    raise Stuck(f"backends {pids} ({session.label}) did not exit after termination")
        session.terminated = True
        if session.gate is not None:
            session.gate.open()  # a parked call goes on, into the dead connection
        if session.pending is not None and session.client is not None:
            assert self.clients is not None
            client_sessions.die(session, self.clients, self.deadline)
        elif session.pending is not None:
            wait_futures([session.pending], timeout=self.deadline)

    def cancel(self, session: Session) -> None:
        """Cancel the session's running statement and wait until its call has returned.

        A call armed to pause between statements is let through first: after the
        cancel it goes on to its clean-up (a ROLLBACK, say), which must not park.
        """
        if session.gate is not None:
            session.gate.open()
        self.monitor.execute(_CANCEL, (sorted(session.pids),))
        if session.pending is not None:
            wait_futures([session.pending], timeout=self.deadline)
            if not session.pending.done():
                raise Stuck(f"{session.label} did not return after its statement was cancelled")

    def cut_short(self, sessions: list[Session]) -> None:
        """Cancel the statements of calls past their deadline; raise CallHung if one goes
        on regardless (ended in its thread first), else return and let the caller say."""
        for session in sessions:
            with contextlib.suppress(psycopg.Error):
                self.monitor.execute(_CANCEL, (sorted(session.pids),))
        pending = [s.pending for s in sessions if s.pending is not None]
        wait_futures(pending, timeout=GRACE)
        going = [s for s in sessions if s.pending is not None and not s.pending.done()]
        for session in going:
            ending(session.conn)
            if session.thread is not None:
                raise_in(session.thread)
            with contextlib.suppress(psycopg.Error):  # back to Python, where it lands
                self.monitor.execute(_TERMINATE, (sorted(session.pids),))
            session.terminated = True
        if going:
            wait_futures([s.pending for s in going if s.pending is not None], timeout=GRACE)
            raise CallHung(hung(going[0].label, going[0].what, self.deadline))

    def close(self) -> None:
        """Close every connection the pool holds, and end those it handed out and never
        got back (a run stopped between examples, a driver left uncleaned): left to the
        garbage collector, one in a transaction would keep its row locks until a moment
        of the collector's choosing, and a later run on the database would meet those
        rows locked (its claims skipping them) or not, as the moment fell."""
        for session in self._out:
            if not session.broken:
                self.terminate(session)
            self.discard(session)
        self._out.clear()
        for session in self._free:
            self.discard(session)
        self._free.clear()
        self._opener.shutdown(wait=True)
        for spare in self._spares:
            if spare.exception() is None:
                spare.result().close()
        self._spares.clear()
        self._endpoints.clear()
        self._closing.set()
        self.monitor.close()
        if self._own_proxy and self.proxy is not None:
            self.proxy.close()

    def last_statement(self, session: Session) -> str:
        """Return the statement the session's backend ran last, shortened for a story."""
        pids = sorted(session.pids - {session.pid}) if session.client else [session.pid]
        row = self.monitor.execute(
            "select query from pg_stat_activity where pid = any(%s)"
            " order by query_start desc nulls last limit 1",
            (pids,),
        ).fetchone()
        text = " ".join(str(row[0]).split()) if row else "?"
        return text if len(text) <= 80 else f"{text[:77]}..."

    def blocked(self, sessions: list[Session]) -> dict[int, list[int]]:
        """Return, for each backend of `sessions` waiting on a lock, the pids it waits for."""
        pids = sorted({p for s in sessions if not s.terminated for p in s.pids})
        if not pids:
            return {}
        rows = self.monitor.execute(
            "select pid, pg_blocking_pids(pid) from unnest(%s::int[]) as pid"
            " where cardinality(pg_blocking_pids(pid)) > 0",
            (pids,),
        ).fetchall()
        return {int(r[0]): [int(p) for p in r[1]] for r in rows}

    def describe(self, sessions: list[Session]) -> str:
        """Return what the backends of `sessions` are doing, for error messages."""
        pids = sorted({p for s in sessions if not s.broken for p in s.pids})
        rows = self.monitor.execute(
            "select pid, state, wait_event_type, wait_event, pg_blocking_pids(pid), query"
            " from pg_stat_activity where pid = any(%s)",
            (pids,),
        ).fetchall()
        return "; ".join(
            f"pid {r[0]} {r[1]} waiting {r[2]}/{r[3]} on {r[4]}: {r[5]!r}" for r in rows
        )


def clean(conn: Connection[Any], then: str = "") -> None:
    """Clear what a queue may leave on a session, so the next example starts alike.

    What DISCARD ALL does, but for DEALLOCATE ALL (psycopg keeps its own prepared
    statements on the session and would not know they were gone): session-level
    advisory locks released (a library's sweep lock, kept for life, would otherwise
    disable the sweeps of every later example), settings back to the connection's
    defaults (the simulated clock's search_path is one, set at connect), cursors
    closed, temporary tables and sequence state dropped, nothing listened to; then the
    harness's own statements `then` (its settings, say), in the same round trip.
    """
    conn.execute(QUERIES["clean_session"].text + (f";\n{then}" if then else ""))


_DEADLOCK_TIMEOUT = "set deadlock_timeout = '1h'"
_CANCEL = "select pg_cancel_backend(pid) from unnest(%s::int[]) as pid"
_TERMINATE = "select pg_terminate_backend(pid) from unnest(%s::int[]) as pid"
"""The harness reports deadlocks itself (superusers only may set it)."""
