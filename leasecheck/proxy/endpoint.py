"""A named listening port: every connection accepted on it is a session of that name.

Each simulated worker gets an endpoint of its own, so whatever connections its library
opens (a pool, a listener, one per call) are known to be that worker's.
"""

from __future__ import annotations

import asyncio
import contextlib

from leasecheck.proxy.hub import Hub
from leasecheck.proxy.session import CHUNK, DEFAULT_TIMEOUT, LOST, Session
from leasecheck.proxy.upstream import LOOPBACK, Upstream, endpoint_dsn
from leasecheck.proxy.wire import REFUSED, Framer, Startup, startup_kind


class Endpoint:
    """One listening socket on the loopback and the sessions accepted on it."""

    def __init__(self, hub: Hub, name: str, upstream: Upstream) -> None:
        self.hub = hub
        self.name = name
        self.upstream = upstream
        self.port = 0
        self._server: asyncio.Server | None = None
        self._sessions: list[Session] = []
        self._serial = 0
        self._stepped = False
        self._passes = 0

    def __repr__(self) -> str:
        return f"<Endpoint {self.name} 127.0.0.1:{self.port} stepped={self.stepped}>"

    # ------------------------------------------------------------ seen from any thread

    @property
    def stepped(self) -> bool:
        """Stepped: each unit waits at its session's gate. Free: units pass at once."""
        with self.hub.cond:
            return self._stepped

    @stepped.setter
    def stepped(self, value: bool) -> None:
        """Setting it free also lets go every unit held now."""
        with self.hub.cond:
            self._stepped = value
            if not value:
                for session in self._sessions:
                    session.let_go()
            self.hub.changed()

    def let_pass(self, count: int) -> None:
        """Let the next `count` units of this endpoint's sessions go by the gate unheld,
        then hold the ones after (a call paused after its `count`-th round trip, as the
        harness pauses one between two of its statements). Free endpoints pass all."""
        if count < 0:
            raise ValueError(f"let_pass takes how many units go by, at least 0, not {count}")
        with self.hub.cond:
            self._passes = count
            self.hub.changed()

    def take_pass(self) -> bool:
        """Use one of the passes `let_pass` left, if any (the loop thread's side)."""
        with self.hub.cond:
            if self._passes <= 0:
                return False
            self._passes -= 1
            return True

    def dsn(self, base_dsn: str) -> str:
        """Return `base_dsn` (its user, database, password...) connecting through here."""
        return endpoint_dsn(base_dsn, self.port)

    def sessions(self) -> list[Session]:
        """Return the live sessions, in accept order."""
        with self.hub.cond:
            return [s for s in self._sessions if s.state != "closed"]

    def all_sessions(self) -> list[Session]:
        """Return every session not forgotten, closed ones too, in accept order."""
        with self.hub.cond:
            return list(self._sessions)

    def forget_closed(self) -> None:
        """Drop closed sessions from this endpoint (between examples of a long run)."""
        with self.hub.cond:
            self._sessions = [s for s in self._sessions if s.state != "closed"]

    def wait_held(self, timeout: float = DEFAULT_TIMEOUT) -> Session:
        """Block until a session of this endpoint holds a unit; return the first such."""
        found: list[Session] = []

        def held() -> bool:
            found[:] = [s for s in self._sessions if s._held is not None]
            return bool(found)

        self.hub.wait_until(
            held,
            timeout,
            lambda: (
                f"no session of endpoint {self.name!r} held a unit within {timeout}s "
                f"(stepped={self._stepped}, sessions {self._sessions}): is its client connected "
                "to this endpoint's dsn() and sending?"
            ),
        )
        return found[0]

    # ------------------------------------------------------------ the loop thread

    async def listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, LOOPBACK, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    async def stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _open_session(self) -> Session:
        task = asyncio.current_task()
        assert task is not None
        with self.hub.cond:
            self._serial += 1
            session = Session(self.hub, self, self._serial, task)
            self._sessions.append(session)
            self.hub.changed()
        return session

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.hub.tasks.add(task)
        task.add_done_callback(self.hub.tasks.discard)
        writer.transport.set_write_buffer_limits(0)
        try:
            await self._serve(reader, writer)
        except LOST:
            pass
        except Exception as exc:
            self.hub.record(exc)
        finally:
            if not writer.is_closing():
                writer.transport.abort()
            with contextlib.suppress(*LOST):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The startup phase: refuse encryption, forward a cancel, or open a session."""
        framer = Framer(startup=True)
        while True:
            packet = framer.next_startup()
            if packet is None:
                data = await reader.read(CHUNK)
                if not data:
                    return
                framer.feed(data)
                continue
            kind = startup_kind(packet)
            if kind in (Startup.SSL, Startup.GSSENC):
                writer.write(REFUSED)
                await writer.drain()
                continue
            if kind is Startup.CANCEL:
                await self._forward_cancel(packet)
                return
            framer.startup = False
            session = self._open_session()
            await session.run((reader, writer), framer, packet, self.upstream)
            return

    async def _forward_cancel(self, packet: bytes) -> None:
        """Send a CancelRequest on, as it came, on a connection of its own; the server
        closes that connection once it has acted on it, and so does the proxy."""
        reader, writer = await self.upstream.open()
        try:
            writer.write(packet)
            await writer.drain()
            await reader.read()
        finally:
            writer.close()
            with contextlib.suppress(*LOST):
                await writer.wait_closed()
