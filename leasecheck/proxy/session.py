"""One client connection relayed to one server connection, its units held at a gate.

Three tasks per session, so no direction waits on the other: the client's bytes are
read and grouped into units as they come (a client that leaves is seen at once, even
while its unit is held); units go to the server one by one through the gate; the
server's messages go to the client as they come (notices and notifications too, while
idle). The controller, on other threads, sees the state under the hub's lock and acts
through `Hub.call`, which runs on the loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from leasecheck.proxy.errors import NotHeld
from leasecheck.proxy.flight import READY, Flight
from leasecheck.proxy.units import TERMINATE, Grouper, Item, Passing, Unit
from leasecheck.proxy.wire import Framer, Message, WireError, backend_pid, error_response

if TYPE_CHECKING:
    from leasecheck.proxy.hub import Hub
    from leasecheck.proxy.upstream import Upstream

CHUNK = 65536
DEFAULT_TIMEOUT = 10.0
LOST = (OSError, asyncio.IncompleteReadError, WireError)
"""What ends a session from the network's side (never a proxy defect)."""
STATES = ("starting", "idle", "held", "running", "closed")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A session as seen at one moment; `state` may also be "blocked" (from `wait_quiet`)."""

    session: Session
    state: str
    statement: str | None
    units_passed: int
    backend_pid: int | None
    blocked_by: tuple[int, ...] = ()
    in_transaction: bool = False
    """Whether a transaction was open at its last ReadyForQuery (it may hold locks)."""


class Gatekeeper(Protocol):
    """What a session asks of its endpoint: its name, whether units wait at the gate,
    and whether one of the passes let through before it is left."""

    @property
    def name(self) -> str: ...

    @property
    def stepped(self) -> bool: ...

    def take_pass(self) -> bool: ...


class Session:
    """A client connection of an endpoint and its server connection."""

    def __init__(
        self, hub: Hub, endpoint: Gatekeeper, serial: int, task: asyncio.Task[Any]
    ) -> None:
        self.hub = hub
        self.task = task
        """The connection's task on the loop, which ends once the session closed."""
        self.endpoint = endpoint
        self.name = endpoint.name
        self.serial = serial
        self.label = f"{endpoint.name}#{serial}"
        # Visible to the controller, under hub.cond.
        self._pid: int | None = None
        self._started = False
        self._closed = False
        self._held: Unit | None = None
        self._released = False
        self._in_flight = 0
        self._statement: str | None = None
        self._units = 0
        self._status = b"I"
        """The transaction status the last ReadyForQuery gave: I(dle), T (in a
        transaction) or E (in a failed one)."""
        self._reason: str | None = None
        # The loop thread's own.
        self._flight = Flight()
        self._prepared: dict[str, str] = {}
        self._queue: asyncio.Queue[Item | None] = asyncio.Queue()
        self._gate = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._done = asyncio.Event()
        self._abort = True
        self._terminate = False
        self._dropping = False
        self._cut_armed = False
        self._client_gone = False
        self._client: asyncio.StreamWriter | None = None
        self._server: asyncio.StreamWriter | None = None

    def __repr__(self) -> str:
        return f"<Session {self.label} pid={self.backend_pid} {self.state}>"

    # ------------------------------------------------------------ seen from any thread

    @property
    def backend_pid(self) -> int | None:
        with self.hub.cond:
            return self._pid

    @property
    def state(self) -> str:
        """One of STATES; "running" lasts until the unit's answer reached the client."""
        with self.hub.cond:
            return self._state()

    @property
    def statement(self) -> str | None:
        """The first statement of the unit held, or else of the unit running."""
        with self.hub.cond:
            return self._statement

    @property
    def in_transaction(self) -> bool:
        """Whether the server said, at its last ReadyForQuery, that a transaction is open
        (what holds locks between two round trips of the client)."""
        return self.snapshot().in_transaction

    @property
    def units_passed(self) -> int:
        with self.hub.cond:
            return self._units

    @property
    def closed_reason(self) -> str | None:
        with self.hub.cond:
            return self._reason if self._closed else None

    def snapshot(self) -> Snapshot:
        with self.hub.cond:
            return Snapshot(
                self,
                self._state(),
                self._statement,
                self._units,
                self._pid,
                in_transaction=not self._closed and self._status != b"I",
            )

    def _state(self) -> str:
        if self._closed:
            return "closed"
        if self._held is not None:
            return "held"
        if self._in_flight or self._released:
            return "running"
        return "idle" if self._started else "starting"

    # ------------------------------------------------------------ the controller's acts

    def release(self) -> None:
        """Let the held unit go to the server."""
        with self.hub.cond:
            if self._held is None:
                raise NotHeld(
                    f"{self.label} holds no unit (it is {self._state()}): wait for one "
                    "with endpoint.wait_held() or proxy.wait_quiet() before release()"
                )
            self._held = None
            self._released = True
            self.hub.changed()
        self.hub.call(self._gate.set)

    def cut(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """A fault: the held (or running) unit runs to its end on the server, commit
        and all, but its answer is dropped and both connections close: the client sees
        the connection lost with no answer. Blocks until closed (a timeout leaves the
        cut to happen when the unit ends); a session with nothing running closes now."""
        with self.hub.cond:
            if self._closed:
                return
            if self._held is not None:
                self._held = None
                self._released = True
            self.hub.changed()
        self.hub.call(self._cut_now)
        self.wait_closed(timeout, "cut")

    def kill(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """A fault: both connections close now, whatever is held or running."""
        self.hub.call(self._finish, "killed by the controller")
        self.wait_closed(timeout, "kill")

    def wait_closed(self, timeout: float = DEFAULT_TIMEOUT, after: str = "wait") -> None:
        self.hub.wait_until(
            lambda: self._closed,
            timeout,
            lambda: (
                f"{after}: {self.label} did not close within {timeout}s ({self._state()}, "
                f"{self._statement!r} on the server, blocked?): release what blocks it, "
                "or raise the timeout"
            ),
        )

    # ------------------------------------------------------------ the loop thread

    async def run(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        framer: Framer,
        startup: bytes,
        upstream: Upstream,
    ) -> None:
        """Relay until either side ends or the controller ends the session."""
        reader, self._client = client
        try:
            opened = await self._open(upstream)
        except OSError as exc:
            await self._refuse(upstream, exc)
            await self._close_transports()
            return
        if opened is None:
            await self._close_transports()
            return
        server_reader, self._server = opened
        self._server.transport.set_write_buffer_limits(0)
        self._server.write(startup)
        tasks = [
            asyncio.create_task(self._guard(self._from_client(reader, framer))),
            asyncio.create_task(self._guard(self._from_server(server_reader))),
            asyncio.create_task(self._guard(self._to_server())),
        ]
        try:
            await self._done.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._close_transports()

    async def _open(
        self, upstream: Upstream
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Connect to the server, unless the session is ended first (None then)."""
        opening = asyncio.ensure_future(upstream.open())
        ending = asyncio.ensure_future(self._done.wait())
        await asyncio.wait((opening, ending), return_when=asyncio.FIRST_COMPLETED)
        ending.cancel()
        if opening.done():
            return opening.result()
        opening.cancel()
        with contextlib.suppress(asyncio.CancelledError, *LOST):
            _, writer = await opening
            writer.transport.abort()
        return None

    async def _refuse(self, upstream: Upstream, exc: OSError) -> None:
        """Tell the client, as a server refusing it would, why it got no server."""
        assert self._client is not None
        text = f"leasecheck proxy: cannot reach the server at {upstream}: {exc}"
        self._finish(text, abort=False)
        with contextlib.suppress(*LOST):
            self._client.write(error_response("08006", text).raw)
            await self._client.drain()

    async def _guard(self, body: Coroutine[Any, Any, None]) -> None:
        try:
            await body
        except LOST as exc:
            self._finish(f"connection lost: {exc!r}")
        except Exception as exc:
            self.hub.record(exc)
            self._finish(f"proxy error: {exc!r}")

    def _finish(self, reason: str, *, abort: bool = True, terminate: bool = False) -> None:
        """End the session (idempotent): `abort` drops unsent bytes; `terminate` says
        goodbye to an idle server first."""
        if self._done.is_set():
            return
        with self.hub.cond:
            self._reason = reason
        self._abort = abort
        self._terminate = terminate
        self._done.set()

    async def _close_transports(self) -> None:
        server, client = self._server, self._client
        if server is not None and self._terminate and not server.is_closing():
            with contextlib.suppress(*LOST):
                server.write(Message.build(TERMINATE).raw)
        for writer in (server, client):
            if writer is None:
                continue
            if self._abort or writer.transport.get_write_buffer_size():
                writer.transport.abort()
            else:
                writer.close()
            with contextlib.suppress(*LOST):
                await writer.wait_closed()
        with self.hub.cond:
            self._closed = True
            self._held = None
            self._released = False
            self._in_flight = 0
            self.hub.changed()

    async def _from_client(self, reader: asyncio.StreamReader, framer: Framer) -> None:
        grouper = Grouper()
        while True:
            for message in framer.messages():
                for item in grouper.feed(message):
                    self._queue.put_nowait(item)
            data = await reader.read(CHUNK)
            if not data:
                self._client_gone = True
                self._queue.put_nowait(None)
                self._drained.set()
                self._gate.set()
                return
            framer.feed(data)

    async def _to_server(self) -> None:
        assert self._server is not None
        while True:
            item = await self._queue.get()
            if item is None:
                self._finish("the client closed its connection", abort=False)
                return
            if isinstance(item, Passing):
                if self._dropping:
                    continue
                self._server.write(item.message.raw)
                await self._server.drain()
                if item.message.kind == TERMINATE:
                    self._finish("the client ended its session", abort=False)
                    return
                continue
            if self._dropping:
                continue
            if self.endpoint.stepped and not await self._hold(item):
                continue
            await self._send(item)

    async def _hold(self, unit: Unit) -> bool:
        """Wait for the previous unit's answer, then at the gate; return whether to send
        `unit` (not if the client left, or a cut came meanwhile).

        One unit at a time reaches the gate: a pipelining client's next unit waits
        until the answer to the last one has reached the client. A client that leaves
        takes its units still held with it (a free endpoint has sent them already)."""
        await self._drained.wait()
        if self._dropping or self._client_gone:
            return False
        if not self.endpoint.stepped or self.endpoint.take_pass():
            return True
        return await self._at_gate(unit)

    async def _at_gate(self, unit: Unit) -> bool:
        self._gate.clear()
        with self.hub.cond:
            if not self.endpoint.stepped:  # set free since `_hold` looked: under the lock
                return True
            self._held = unit
            self._statement = unit.statement(self._prepared)
            self.hub.changed()
        await self._gate.wait()
        self._gate.clear()
        if self._client_gone:
            with self.hub.cond:
                self._held = None
                self._released = False
                self.hub.changed()
            return False
        return True

    def let_go(self) -> None:
        """Let the held unit go, if one is held (the endpoint was set free). Its state
        is running when this returns, so a caller that looks next never sees it held."""
        with self.hub.cond:
            if self._held is None:
                return
            self._held = None
            self._released = True
            self.hub.changed()
        self.hub.call(self._gate.set)

    async def _send(self, unit: Unit) -> None:
        assert self._server is not None
        with self.hub.cond:
            self._statement = unit.statement(self._prepared)
            self._released = False
            self._units += 1
            owed = self._flight.sent(unit)
            self._in_flight = len(self._flight)
            self.hub.changed()
        unit.remember(self._prepared)
        if owed:
            self._drained.clear()
        self._server.write(unit.raw)
        await self._server.drain()
        if self._dropping:
            self._cut_armed = True
            self._end_cut()

    def _cut_now(self) -> None:
        """Drop every answer from now on; close once the server has answered all."""
        self._dropping = True
        with self.hub.cond:
            releasing = self._released
        if releasing:
            self._gate.set()
            return
        self._cut_armed = True
        self._end_cut()

    def _end_cut(self) -> None:
        if self._cut_armed and not self._flight:
            self._finish("cut by the controller", abort=False, terminate=True)

    async def _from_server(self, reader: asyncio.StreamReader) -> None:
        assert self._client is not None
        framer = Framer()
        while True:
            data = await reader.read(CHUNK)
            if not data:
                self._finish("the server closed the connection", abort=False)
                return
            framer.feed(data)
            out = bytearray()
            answered = 0
            pid: int | None = None
            ready: bytes | None = None
            for message in framer.messages():
                if message.kind == b"K":
                    pid = backend_pid(message)
                if message.kind == READY:
                    ready = message.body[:1]
                answered += self._flight.received(message.kind)
                if not self._dropping:
                    out += message.raw
            if out:
                self._client.write(out)
                await self._client.drain()
            self._account(answered, pid, ready)
            self._end_cut()

    def _account(self, answered: int, pid: int | None, ready: bytes | None) -> None:
        """Publish what the server's last messages changed, once they reached the client
        (`ready`: the transaction status of the last ReadyForQuery among them)."""
        if not self._flight:
            self._drained.set()
        if not (answered or pid is not None or ready is not None):
            return
        with self.hub.cond:
            if pid is not None:
                self._pid = pid
            if ready is not None:
                self._status = ready
            self._started = self._started or ready is not None
            self._in_flight = len(self._flight)
            if not self._in_flight and self._held is None and not self._released:
                self._statement = None
            self.hub.changed()
