"""A client's messages grouped into units: what one round trip sends.

The gate holds whole units, never single messages: a statement's Parse, Bind and
Execute mean nothing to the server until its Sync (or a Flush) arrives, and a gate
between them would only stall the server mid-protocol. A unit is what the client
sends before it waits for an answer, so holding it is holding one round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

from leasecheck.proxy.wire import (
    Message,
    bind_statement,
    closed_statement,
    parse_name,
    query_text,
)

SYNCED_ENDS = frozenset((b"Q", b"S", b"F"))
"""Kinds that end a unit whose answer ends with ReadyForQuery."""
FLUSH = b"H"
PASS_THROUGH = frozenset((b"d", b"c", b"f", b"p", b"X"))
"""Kinds never held: copy-in data (part of the unit already sent), the answers to
authentication requests, and Terminate. A Flush with nothing before it passes too:
it asks for no answer (psycopg sends one behind its pipeline's last Sync)."""
TERMINATE = b"X"
ANSWERED = frozenset((b"P", b"B", b"C", b"D", b"E"))
"""Extended-protocol kinds that each get one final reply (what a Flush unit waits for)."""


@dataclass(frozen=True, slots=True)
class Unit:
    """Messages sent together and answered together."""

    messages: tuple[Message, ...]

    @property
    def raw(self) -> bytes:
        return b"".join(m.raw for m in self.messages)

    @property
    def synced(self) -> bool:
        """Whether its answer ends with ReadyForQuery (else it ended with a Flush)."""
        return self.messages[-1].kind in SYNCED_ENDS

    @property
    def replies(self) -> int:
        """How many final replies a Flush-ended unit gets (one per P, B, C, D, E)."""
        return sum(1 for m in self.messages if m.kind in ANSWERED)

    def statement(self, prepared: dict[str, str]) -> str | None:
        """Return the first statement this unit runs or prepares, for stories.

        A Bind names a statement prepared earlier (`prepared`, by name) or in this unit.
        """
        known = dict(prepared)
        for message in self.messages:
            text = query_text(message)
            if text is not None:
                if message.kind == b"Q":
                    return text
                known[parse_name(message)] = text
                return text
            if message.kind == b"B":
                found = known.get(bind_statement(message))
                if found is not None:
                    return found
            if message.kind == b"F":
                return "(function call)"
        return None

    def remember(self, prepared: dict[str, str]) -> None:
        """Record in `prepared` the statements this unit parses or closes, once sent."""
        for message in self.messages:
            if message.kind == b"P":
                prepared[parse_name(message)] = query_text(message) or ""
            elif message.kind == b"C":
                name = closed_statement(message)
                if name is not None:
                    prepared.pop(name, None)


@dataclass(frozen=True, slots=True)
class Passing:
    """A message that goes to the server at once, in order, never held."""

    message: Message


Item = Unit | Passing


class Grouper:
    """Turns the client's messages, in order, into units and passing messages."""

    def __init__(self) -> None:
        self._pending: list[Message] = []
        self._last_synced = False
        self._after_copy = False

    def feed(self, message: Message) -> list[Item]:
        """Return what `message` completes: nothing yet, a unit, or a passing message.

        After an extended-protocol COPY FROM STDIN, libpq sends a Sync behind CopyDone
        (the server ignored the unit's own Sync while copying); that Sync belongs to the
        unit already running and passes.
        """
        kind = message.kind
        after_copy, self._after_copy = self._after_copy, False
        if kind in (b"c", b"f"):
            self._after_copy = self._last_synced
        if kind == b"S" and after_copy and not self._pending:
            return [Passing(message)]
        if kind in PASS_THROUGH or (kind == FLUSH and not self._pending):
            if kind == TERMINATE:
                self._pending.clear()
            return [Passing(message)]
        self._pending.append(message)
        if kind not in SYNCED_ENDS and kind != FLUSH:
            return []
        unit = Unit(tuple(self._pending))
        self._pending.clear()
        self._last_synced = kind == b"S"
        return [unit]

    @property
    def pending(self) -> int:
        """Messages received of a unit not yet ended."""
        return len(self._pending)
