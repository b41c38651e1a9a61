"""Preemption on the wire: the harness's own sessions opened through the stepping proxy.

A call paused by the proxy (`WireGate`: its endpoint lets `after` round trips go by and
holds the next) must stop where psycopg's gate parks it, or a queue on connections of
its own would be searched at other points than one on the harness's. So the same
searches run both ways on the same queues: the small scope of one worker's paused calls
reaches the same schedules and the same states, the opening holds on the reference,
and a report that checks then acts dies only when paused between the two, as it does
without the proxy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from bench import corpus
from leasecheck.dbfixtures import janitor
from leasecheck.proxy import Proxy
from leasecheck.stateful import clock, opening
from leasecheck.stateful.exhaustive.layer import SCOPES
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay
from tests.fixtures import harnesses

REFERENCE = "leasecheck.reference.queue:ReferenceQueue"
PAUSED = dataclasses.replace(SCOPES[1][0], moves=3)
"""One worker, one job, three moves, one call paused between its statements (the
opening's second scope, a move shorter)."""

HarnessOf = Callable[[str, bool], Harness]


@pytest.fixture
def harness_of(leasecheck_server_dsn: str, leasecheck_worker_label: str) -> Iterator[HarnessOf]:
    """Return a function that gives a harness on a fresh database with `spec`'s queue,
    its sessions opened through a stepping proxy (`wired`) or straight to the server."""
    with (
        janitor.temporary(leasecheck_server_dsn, f"{leasecheck_worker_label}_wire") as dsn,
        Proxy(dsn) as proxy,
        harnesses(dsn) as make,
    ):
        yield lambda spec, through: make(spec, proxy if through else None)
    assert proxy.errors == []


def test_the_paused_scope_reaches_the_same_states_on_the_wire(
    harness_of: HarnessOf, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg prepares a statement run five times in a round trip of its own, inside the
    one `wait` its gate counts: the wire sees that round trip, psycopg's gate does not
    (a finer point, a prepare changes no row). With preparing off, both see the same
    round trips, and the search must meet the same states."""
    connect = clock.connect

    def unprepared(*args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = connect(*args, **kwargs)
        conn.prepare_threshold = None
        return conn

    monkeypatch.setattr(clock, "connect", unprepared)
    searched: dict[bool, tuple[int, int, int]] = {}
    for wired in (False, True):
        harness = harness_of(REFERENCE, wired)
        done = explore(harness, PAUSED, None, schedules=None)
        assert done.complete and done.violation is None
        paused = harness.coverage["call paused between its statements"]
        searched[wired] = (done.schedules, done.states, paused)
        assert (harness.pool.proxy is not None) == wired
    assert searched[True] == searched[False]
    assert searched[True][2] > 0  # calls were paused, on the wire too


def test_the_opening_holds_on_the_wire(harness_of: HarnessOf) -> None:
    harness = harness_of(REFERENCE, True)
    opening.play(harness)
    assert harness.played == len(opening.stories(harness.caps, harness.queue.max_attempts))
    assert harness.opening is None


def test_a_check_then_act_report_dies_paused_on_the_wire(harness_of: HarnessOf) -> None:
    """With the rival's claim committed at once, a check-then-act failure report reads
    the new owner and refuses; held on the wire between its read and its write, it is
    accepted, as when psycopg's gate parks it."""
    spec = corpus.VARIANTS["orm-items-check-then-act-fail"].spec
    assert spec is not None
    harness = harness_of(spec, True)
    told = {s.name: s for s in opening.stories(harness.caps, harness.queue.max_attempts)}
    replay.replay(harness, list(told["takeover: fail, rival commits"].steps))
    with pytest.raises(PropertyViolated) as raised:
        replay.replay(harness, list(told["report paused in flight: fail, after 2"].steps))
    assert raised.value.violation.prop == "fencing"
