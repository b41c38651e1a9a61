"""Framing of the PostgreSQL v3 wire protocol: enough to cut a byte stream into messages.

Nothing is decoded beyond what stepping needs (the kind of a message, a statement's
text, the backend's pid), so every message can be relayed exactly as it arrived.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
PROTOCOL_MAJOR = 3
REFUSED = b"N"
"""The one-byte answer to SSLRequest and GSSENCRequest: go on unencrypted."""

MAX_STARTUP = 10_000
"""The server's own limit on a startup packet's length (MAX_STARTUP_PACKET_LENGTH)."""

_INT32 = struct.Struct("!i")
_HEADER = struct.Struct("!ci")


class WireError(Exception):
    """The peer sent bytes that are not the v3 protocol."""


class Startup(enum.Enum):
    """What the first packet of a connection asks for."""

    SSL = "ssl"
    GSSENC = "gssenc"
    CANCEL = "cancel"
    STARTUP = "startup"


@dataclass(frozen=True, slots=True)
class Message:
    """One typed message, kept as it came: `raw` is what is relayed."""

    kind: bytes
    raw: bytes

    @property
    def body(self) -> bytes:
        return self.raw[5:]

    @classmethod
    def build(cls, kind: bytes, body: bytes = b"") -> Message:
        return cls(kind, _HEADER.pack(kind, len(body) + 4) + body)


class Framer:
    """Cuts a stream, fed in chunks of any size, into startup packets and messages.

    A connection starts untyped (startup packets: a length, then the payload) and,
    once the caller has seen its StartupMessage, goes on typed (a kind byte first).
    """

    def __init__(self, *, startup: bool = False) -> None:
        self._buffer = bytearray()
        self.startup = startup

    def feed(self, data: bytes) -> None:
        self._buffer += data

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a whole packet."""
        return len(self._buffer)

    def next_startup(self) -> bytes | None:
        """Return the next whole startup packet (with its length), or None for now."""
        if not self.startup:
            raise WireError("the startup phase is over: read typed messages")
        if len(self._buffer) < 4:
            return None
        (length,) = _INT32.unpack_from(self._buffer)
        if length < 8 or length > MAX_STARTUP:
            raise WireError(f"a startup packet of {length} bytes")
        if len(self._buffer) < length:
            return None
        return self._take(length)

    def next_message(self) -> Message | None:
        """Return the next whole typed message, or None for now."""
        if self.startup:
            raise WireError("the startup phase is not over: read startup packets")
        if len(self._buffer) < 5:
            return None
        kind, length = _HEADER.unpack_from(self._buffer)
        if length < 4:
            raise WireError(f"a {kind!r} message of length {length}")
        if len(self._buffer) < length + 1:
            return None
        return Message(kind, self._take(length + 1))

    def messages(self) -> list[Message]:
        """Return every whole typed message received so far."""
        found = []
        while (message := self.next_message()) is not None:
            found.append(message)
        return found

    def _take(self, count: int) -> bytes:
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken


def startup_kind(packet: bytes) -> Startup:
    """Say what a startup packet asks for, from its code (the int32 after the length)."""
    (code,) = _INT32.unpack_from(packet, 4)
    if code == SSL_REQUEST:
        return Startup.SSL
    if code == GSSENC_REQUEST:
        return Startup.GSSENC
    if code == CANCEL_REQUEST:
        return Startup.CANCEL
    if code >> 16 == PROTOCOL_MAJOR:
        return Startup.STARTUP
    raise WireError(f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}")


def startup_packet(code: int, payload: bytes = b"") -> bytes:
    """Return a startup packet with `code` and `payload` (what a client sends first)."""
    return _INT32.pack(len(payload) + 8) + _INT32.pack(code) + payload


def backend_pid(key_data: Message) -> int:
    """Return the pid a BackendKeyData ('K') message names (its first field)."""
    (pid,) = _INT32.unpack_from(key_data.body)
    return int(pid)


def _cstrings(body: bytes, count: int) -> list[str]:
    parts = body.split(b"\0", count)
    return [p.decode("utf-8", "replace") for p in parts[:count]]


def query_text(message: Message) -> str | None:
    """Return the SQL a Query ('Q') or Parse ('P') carries, or None for other kinds."""
    if message.kind == b"Q":
        return _cstrings(message.body, 1)[0]
    if message.kind == b"P":
        return _cstrings(message.body, 2)[1]
    return None


def parse_name(message: Message) -> str:
    """Return the statement name of a Parse ('P'); '' is the unnamed statement."""
    return _cstrings(message.body, 1)[0]


def bind_statement(message: Message) -> str:
    """Return the statement name a Bind ('B') binds (after its portal name)."""
    return _cstrings(message.body, 2)[1]


def closed_statement(message: Message) -> str | None:
    """Return the statement name a Close ('C') of a statement drops, or None (a portal)."""
    if message.body[:1] != b"S":
        return None
    return _cstrings(message.body[1:], 1)[0]


def error_response(sqlstate: str, text: str) -> Message:
    """Return a FATAL ErrorResponse, the way a server refuses a connection."""
    fields = b"".join(
        tag + value.encode() + b"\0"
        for tag, value in ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", sqlstate), (b"M", text))
    )
    return Message.build(b"E", fields + b"\0")
