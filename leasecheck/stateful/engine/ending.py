"""What the harness ends on purpose, and how it keeps that from reading as the queue's
doing: backends it terminated (a crash, a cut, a call past its deadline), whose
psycopg warnings it silences, and calls that went on past their deadline, which it
ends with `CallHung` raised inside their thread.
"""

from __future__ import annotations

import ctypes
import logging
import weakref
from typing import Any

from psycopg import Connection

_ENDED: dict[int, weakref.ref[Connection[Any]]] = {}
"""Connections whose backend the harness ended (a crash, a cut, a call past its
deadline), by id. Plain references, with no callback: a WeakSet's callback would be one
more place where an interrupt is dropped."""


class _QuietAboutTheEnded(logging.Filter):
    """Drop psycopg's "error ignored in rollback" warning when the connection is one the
    harness ended: the library's `with conn.transaction()` block tries to roll back on a
    backend a crash terminated. The harness caused it and the story says so; printed, it
    read as a fault in the queue (and, from `explore`, as the only output for minutes)."""

    def filter(self, record: logging.LogRecord) -> bool:
        about = record.args[0] if isinstance(record.args, tuple) and record.args else None
        conn = getattr(about, "connection", about)  # a Transaction names its connection
        ended = _ENDED.get(id(conn))
        return ended is None or ended() is not conn


_QUIET = _QuietAboutTheEnded()


def quiet_psycopg() -> None:
    """Filter psycopg's loggers (once) for warnings about connections the harness ended."""
    for name in ("psycopg", "psycopg.transaction"):
        logger = logging.getLogger(name)
        if _QUIET not in logger.filters:
            logger.addFilter(_QUIET)


def ending(conn: Connection[Any]) -> None:
    """Note that the harness is about to end the connection's backend: before the command
    goes, since the library's thread may meet the termination (and psycopg warn) before
    the harness hears that it is done."""
    if len(_ENDED) > 1000:  # forget the connections gone since
        for key in [k for k, ref in _ENDED.items() if ref() is None]:
            del _ENDED[key]
    _ENDED[id(conn)] = weakref.ref(conn)


GRACE = 2.0
"""Seconds a call past its deadline gets, once its statement was cancelled (or its
client closed), to return by itself before `CallHung` is raised inside its thread."""


class Stuck(RuntimeError):
    """A call neither finished nor waited on a lock within the safety timeout."""


class CallHung(BaseException):
    """A queue's call went on past its deadline after its statement was cancelled: a
    library that retries or reconnects forever. Raised inside the call's thread to end
    it, then out of the run, which gives no verdict. A BaseException, so that neither
    the library's `except Exception` nor Hypothesis's search takes it for an answer."""


def raise_in(thread: int) -> None:
    """Raise CallHung in the thread `thread` at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(CallHung))


def hung(label: str, doing: tuple[str, str | None], deadline: float) -> str:
    """Return what a hung call's run says: the call, the worker, what to check."""
    what, about = doing
    call = f"{what} of {about}" if what and about else what or "call"
    return (
        f"{label}'s {call} did not return within {deadline:g} s and went on after its "
        "statement was cancelled: does the queue (or its library) retry or reconnect forever? "
        "Let its calls raise on a broken connection (or set --leasecheck-call-deadline)"
    )
