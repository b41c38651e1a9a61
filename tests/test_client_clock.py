"""`leasecheck.adapters.client_clock`: a library's `time.time()` answers the simulated `now()`."""

from __future__ import annotations

import asyncio
import threading
import time
import types
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from leasecheck.adapters import client_clock as cc
from leasecheck.stateful import clock


def _library() -> types.ModuleType:
    """A module that reads the client's clock the two usual ways."""
    lib = types.ModuleType("clock_reading_library")
    exec(
        "import time\n"
        "from time import time as stamp, time_ns\n"
        "def seconds(): return time.time()\n"
        "def millis(): return int(time.time() * 1000)\n"
        "def imported(): return stamp()\n"
        "def nanos(): return time_ns()\n"
        "def monotonic(): return time.monotonic()\n",
        lib.__dict__,
    )
    return lib


@pytest.fixture
def lib() -> Iterator[types.ModuleType]:
    module = _library()
    yield module
    for name in ("time", "stamp", "time_ns"):
        cc.uninstall(module, name)


def _epoch_seconds() -> float:
    return clock.EPOCH.timestamp()


def test_the_block_answers_the_connections_now(
    db: psycopg.Connection[Any], lib: types.ModuleType
) -> None:
    """Inside, the library's clock is the simulated now (frozen); outside, the real clock."""
    clock.advance(db, timedelta(seconds=90, microseconds=5))
    with cc.client_clock(db, (lib, "time"), (lib, "stamp"), (lib, "time_ns")) as at:
        assert at == clock.EPOCH + timedelta(seconds=90, microseconds=5)
        assert cc.current() == at
        assert lib.seconds() == at.timestamp() == lib.imported()
        assert lib.millis() == int((_epoch_seconds() + 90) * 1000)
        assert lib.nanos() == int(_epoch_seconds() + 90) * 10**9 + 5000
        assert abs(lib.monotonic() - time.monotonic()) < 5  # the rest is the real module
    assert cc.current() is None
    assert abs(lib.seconds() - time.time()) < 5
    assert abs(lib.imported() - time.time()) < 5
    assert cc.simulated_now(db) == at


def test_it_follows_the_clock_from_one_block_to_the_next(
    db: psycopg.Connection[Any], lib: types.ModuleType
) -> None:
    """Each block reads now() afresh; blocks nest and the inner instant wins."""
    with cc.client_clock(db, (lib, "time")):
        first = lib.seconds()
        clock.advance(db, timedelta(seconds=30))
        assert lib.seconds() == first  # read once, at the block's start
        with cc.client_clock(db, (lib, "time")):
            assert lib.seconds() == first + 30
        assert lib.seconds() == first


def test_coroutines_started_in_the_block_see_it(
    db: psycopg.Connection[Any], lib: types.ModuleType
) -> None:
    """`asyncio.run` inside the block copies the instant into its tasks."""

    async def read() -> list[float]:
        inner = asyncio.create_task(asyncio.sleep(0, result=lib.seconds()))
        return [lib.seconds(), await inner]

    with cc.client_clock(db, (lib, "time")) as at:
        assert asyncio.run(read()) == [at.timestamp()] * 2


def test_each_thread_sees_its_own_calls_instant(
    db: psycopg.Connection[Any], reference_dsn: str, lib: types.ModuleType
) -> None:
    """Two workers' calls on two threads: each reads its own block's instant."""
    cc.install(lib, "time")
    entered, moved = threading.Event(), threading.Event()
    seen: dict[str, float] = {}

    def early() -> None:
        with clock.connect(reference_dsn) as conn, cc.client_clock(conn, (lib, "time")):
            entered.set()
            moved.wait(10)
            seen["early"] = lib.seconds()

    thread = threading.Thread(target=early)
    thread.start()
    assert entered.wait(10)
    clock.advance(db, timedelta(seconds=60))
    with cc.client_clock(db, (lib, "time")):
        seen["late"] = lib.seconds()
        moved.set()
        thread.join(10)
    assert seen == {"early": _epoch_seconds(), "late": _epoch_seconds() + 60}


def test_install_is_idempotent_and_uninstall_puts_the_original_back(
    lib: types.ModuleType,
) -> None:
    cc.install(lib, "time")
    stand_in = lib.time
    cc.install(lib, "time")
    assert lib.time is stand_in and stand_in is not time
    cc.uninstall(lib, "time")
    assert lib.time is time
    cc.uninstall(lib, "time")  # nothing to put back: nothing happens
    assert lib.time is time


def test_only_clocks_it_knows_are_replaced(
    db: psycopg.Connection[Any], lib: types.ModuleType
) -> None:
    """A target that is not the time module, time.time or time.time_ns is a TypeError."""
    with (
        pytest.raises(TypeError, match=r"time module, time\.time or time\.time_ns"),
        cc.client_clock(db, (lib, "seconds")),
    ):
        pass
    assert lib.seconds.__name__ == "seconds"
