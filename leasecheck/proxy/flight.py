"""Units sent to the server whose answers have not all come back.

A unit ended by Sync (or a simple Query) is answered when its ReadyForQuery comes.
A unit ended by Flush gets no ReadyForQuery: it is answered by its last reply, one
final reply per Parse, Bind, Close, Describe and Execute; or by an ErrorResponse,
after which the server skips everything up to the next Sync (so Flush units sent
meanwhile get no reply at all).
"""

from __future__ import annotations

from collections import deque

from leasecheck.proxy.units import Unit

FINAL_REPLIES = frozenset((b"1", b"2", b"3", b"T", b"n", b"C", b"s", b"I"))
"""ParseComplete, BindComplete, CloseComplete, RowDescription or NoData (a Describe's
last reply), CommandComplete, PortalSuspended, EmptyQueryResponse."""
READY = b"Z"
ERROR = b"E"


class Flight:
    """Counts what the server still owes, in the order units were sent."""

    def __init__(self) -> None:
        self._owed: deque[list[int]] = deque()
        """One entry per unit: [-1] for a synced unit, [n] for a Flush unit owing n."""
        self._skipping = False

    def __len__(self) -> int:
        return len(self._owed)

    def sent(self, unit: Unit) -> bool:
        """Record `unit` as sent; return whether it awaits an answer."""
        if unit.synced:
            self._owed.append([-1])
            return True
        owed = 0 if self._skipping else unit.replies
        if owed:
            self._owed.append([owed])
        return owed > 0

    def received(self, kind: bytes) -> int:
        """Account for a server message of `kind`; return how many units it answered."""
        done = 0
        if kind == READY:
            self._skipping = False
            done += self._pop_flushed()
            if self._owed:
                self._owed.popleft()
                done += 1
        elif kind == ERROR and self._owed and self._owed[0][0] > 0:
            self._skipping = True
            done += self._pop_flushed()
        elif kind in FINAL_REPLIES and self._owed and self._owed[0][0] > 0:
            self._owed[0][0] -= 1
            if self._owed[0][0] == 0:
                self._owed.popleft()
                done += 1
        return done

    def _pop_flushed(self) -> int:
        done = 0
        while self._owed and self._owed[0][0] > 0:
            self._owed.popleft()
            done += 1
        return done
