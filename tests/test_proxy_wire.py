"""The stepping proxy's framing, without a database: bytes to messages, messages to units.

The one test that runs the proxy points it at a port nothing listens on: the startup
answers it gives before it ever reaches a server.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest

from leasecheck.proxy import Proxy
from leasecheck.proxy.flight import Flight
from leasecheck.proxy.units import Grouper, Passing, Unit
from leasecheck.proxy.wire import (
    CANCEL_REQUEST,
    SSL_REQUEST,
    Framer,
    Message,
    Startup,
    WireError,
    startup_kind,
    startup_packet,
)

PROTOCOL_3 = 3 << 16


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def parse(sql: str, name: str = "") -> Message:
    return Message.build(b"P", _cstr(name) + _cstr(sql) + struct.pack("!h", 0))


def bind(statement: str = "", portal: str = "") -> Message:
    return Message.build(b"B", _cstr(portal) + _cstr(statement) + struct.pack("!hhh", 0, 0, 0))


DESCRIBE = Message.build(b"D", b"P\0")
EXECUTE = Message.build(b"E", b"\0" + struct.pack("!i", 0))
SYNC = Message.build(b"S")
FLUSH = Message.build(b"H")


def query(sql: str) -> Message:
    return Message.build(b"Q", _cstr(sql))


def _feed_all(grouper: Grouper, messages: list[Message]) -> list[Unit | Passing]:
    return [item for m in messages for item in grouper.feed(m)]


def test_messages_split_across_reads_and_several_in_one_read() -> None:
    """Byte by byte or all at once, the same messages come out, whole and in order."""
    sent = [query("select 1"), parse("select $1", "s1"), bind("s1"), EXECUTE, SYNC]
    stream = b"".join(m.raw for m in sent)
    trickled = Framer()
    got: list[Message] = []
    for i in range(len(stream)):
        trickled.feed(stream[i : i + 1])
        got.extend(trickled.messages())
    assert got == sent
    assert trickled.pending == 0
    at_once = Framer()
    at_once.feed(stream + SYNC.raw[:3])
    assert at_once.messages() == sent
    assert at_once.pending == 3


def test_the_startup_packet() -> None:
    """Untyped until the StartupMessage; typed messages right behind it are kept."""
    startup = startup_packet(PROTOCOL_3, _cstr("user") + _cstr("postgres") + b"\0")
    framer = Framer(startup=True)
    framer.feed(startup[:6])
    assert framer.next_startup() is None
    framer.feed(startup[6:] + query("select 1").raw)
    packet = framer.next_startup()
    assert packet == startup
    assert startup_kind(packet) is Startup.STARTUP
    framer.startup = False
    assert framer.messages() == [query("select 1")]
    assert startup_kind(startup_packet(SSL_REQUEST)) is Startup.SSL
    assert startup_kind(startup_packet(CANCEL_REQUEST, b"\0" * 8)) is Startup.CANCEL
    with pytest.raises(WireError, match="protocol 2"):
        startup_kind(startup_packet(2 << 16))


@pytest.fixture
def refused_port() -> Iterator[int]:
    """Return a loopback port bound but not listening: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_an_ssl_request_is_answered_n_then_a_lost_server_is_said(refused_port: int) -> None:
    """TLS is refused with 'N' before any server is reached; when the server cannot be
    reached, the client reads an ErrorResponse saying so, then the end of the stream."""
    with Proxy(("127.0.0.1", refused_port)) as proxy:
        endpoint = proxy.endpoint("w0")
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=10) as client:
            client.sendall(startup_packet(SSL_REQUEST))
            assert client.recv(1) == b"N"
            client.sendall(startup_packet(PROTOCOL_3, _cstr("user") + _cstr("x") + b"\0"))
            answer = b""
            while chunk := client.recv(4096):
                answer += chunk
        assert answer[:1] == b"E"
        assert b"08006" in answer
        assert b"cannot reach the server" in answer
        assert proxy.errors == []


def test_a_unit_groups_parse_bind_describe_execute_sync() -> None:
    """Nothing is a unit before its Sync; then all five are one, answered by a
    ReadyForQuery; a simple Query is a unit alone."""
    grouper = Grouper()
    extended = [parse("select $1::int"), bind(), DESCRIBE, EXECUTE]
    assert _feed_all(grouper, extended) == []
    assert grouper.pending == 4
    [unit] = grouper.feed(SYNC)
    assert isinstance(unit, Unit)
    assert unit.messages == (*extended, SYNC)
    assert unit.synced
    assert unit.statement({}) == "select $1::int"
    assert grouper.feed(query("select 2")) == [Unit((query("select 2"),))]
    named = Unit((bind("s9"), EXECUTE, SYNC))
    assert named.statement({"s9": "select 9"}) == "select 9"
    flight = Flight()
    assert flight.sent(unit)
    assert [flight.received(k) for k in (b"1", b"2", b"T", b"D", b"C")] == [0] * 5
    assert flight.received(b"Z") == 1
    assert len(flight) == 0


def test_a_flush_ends_a_unit() -> None:
    """A Flush ends a unit (its client waits for the replies), answered by its last
    final reply, or by an error, after which the server skips to the next Sync; a
    Flush with nothing before it is no round trip and passes."""
    grouper = Grouper()
    assert grouper.feed(FLUSH) == [Passing(FLUSH)], "a bare Flush asks for nothing"
    items = _feed_all(grouper, [parse("select 1"), bind(), DESCRIBE, EXECUTE, FLUSH])
    [unit] = items
    assert isinstance(unit, Unit)
    assert not unit.synced
    assert unit.replies == 4
    flight = Flight()
    assert flight.sent(unit)
    assert [flight.received(k) for k in (b"1", b"2", b"T", b"D")] == [0, 0, 0, 0]
    assert flight.received(b"C") == 1
    assert len(flight) == 0
    assert flight.sent(unit)
    assert flight.received(b"1") == 0
    assert flight.received(b"E") == 1
    assert not flight.sent(unit), "skipped by the server until a Sync: no answer owed"
    [sync] = grouper.feed(SYNC)
    assert isinstance(sync, Unit)
    assert flight.sent(sync)
    assert flight.received(b"Z") == 1


def test_copy_in_messages_pass_and_so_does_libpq_s_sync_after_copy_done() -> None:
    """CopyData and CopyDone are part of the unit already sent; after an extended
    COPY FROM STDIN, the Sync behind CopyDone is too, while after a simple one a Sync
    is a unit of its own; Terminate passes and drops an unfinished unit."""
    grouper = Grouper()
    data, done = Message.build(b"d", b"1\n"), Message.build(b"c")
    assert grouper.feed(query("copy t from stdin")) == [Unit((query("copy t from stdin"),))]
    assert _feed_all(grouper, [data, done]) == [Passing(data), Passing(done)]
    assert grouper.feed(SYNC) == [Unit((SYNC,))]
    extended = [parse("copy t from stdin"), bind(), EXECUTE, SYNC]
    assert _feed_all(grouper, extended) == [Unit(tuple(extended))]
    assert _feed_all(grouper, [data, done, SYNC]) == [Passing(data), Passing(done), Passing(SYNC)]
    assert grouper.feed(SYNC) == [Unit((SYNC,))]
    terminate = Message.build(b"X")
    assert _feed_all(grouper, [parse("select 1"), terminate]) == [Passing(terminate)]
    assert grouper.pending == 0
