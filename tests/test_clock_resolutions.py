"""The clock moves at the resolutions queues store: a millisecond, a second, 2 s.

A queue that keeps epoch milliseconds or whole seconds rounds a lease end up to its own
boundary, so a move a microsecond past the true end leaves the lease still running for
it: its expired job is never handed out again, and every situation that follows a
reclaim (a stale call, a claim at the attempt cap) never comes up. Each queue here is
the reference with its lease end rounded up, as such a column stores it; a short program
claims, stalls the owner, moves the clock and claims again, on a real database.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from psycopg import Connection

from leasecheck.reference.queue import QUERIES, ReferenceQueue, check_lease, check_worker
from leasecheck.stateful.contract import Claim
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import NEAR_END, TIMES, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.story import replay
from leasecheck.stateful.units import LEASE, MILLISECOND, ROUNDED, SECOND, stamp

RECLAIMED = "expired lease claimed again"


def _rounded(text: str, end: str, now: str = "now()") -> str:
    """Return the reference's SQL `text` with every lease it writes ending at `end` (its
    true end rounded) and every expiry it reads compared with `now` (now, or rounded)."""
    written = text.replace("lease_until = now() + %(lease)s", f"lease_until = {end}")
    assert written != text, "the reference's SQL no longer writes lease_until = now() + lease"
    return written.replace("lease_until < now()", f"lease_until < {now}")


CEIL_MS = "date_trunc('milliseconds', now() + %(lease)s + interval '999 microseconds')"
CEIL_S = "date_trunc('second', now() + %(lease)s + interval '999999 microseconds')"
FLOOR_NOW_S = "date_trunc('second', now())"


class Rounding(ReferenceQueue):
    """The reference, storing its lease ends rounded up (and, in `now`, reading the clock
    rounded down): the claim and the heartbeat, the calls that write or read a lease end.
    It claims one job at a time: a batch is beside the point here."""

    claim_many = None  # type: ignore[assignment]
    complete_many = None  # type: ignore[assignment]
    end = "now() + %(lease)s"
    now = "now()"

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        params = {"worker": check_worker(worker), "lease": check_lease(lease)}
        row = conn.execute(_rounded(QUERIES["claim"].text, self.end, self.now), params).fetchone()
        return None if row is None else Claim(job_id=int(row[0]), token=int(row[1]), worker=worker)

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        params = {"id": claim.job_id, "attempt": claim.token, "lease": check_lease(lease)}
        text = _rounded(QUERIES["heartbeat"].text, self.end)
        return conn.execute(text, params).fetchone() is not None


class Milliseconds(Rounding):
    """Epoch milliseconds: the end rounded up to the millisecond."""

    name = "milliseconds"
    end = CEIL_MS


class WholeSeconds(Rounding):
    """Integer seconds: the end rounded up to the second."""

    name = "whole-seconds"
    end = CEIL_S


class SecondsBothSides(Rounding):
    """Integer seconds on both sides: the end rounded up, `now()` rounded down (a
    `time()` in the client, an `extract(epoch ...)::bigint` floored)."""

    name = "seconds-both-sides"
    end = CEIL_S
    now = FLOOR_NOW_S


def _stall_then_claim(*moves: str) -> list[Step]:
    """w0 claims job1 and freezes (no heartbeats); the clock makes `moves`, w1 claiming
    after each: whether it takes job1 again is whether the queue counts w0's lease out."""
    steps = [
        Step("start", {"workers": 2}),
        Step("claim", {"how": Take(worker=0, held=False)}),
        Step("pause", {"pick": 0}),
    ]
    for to in moves:
        steps += [Step("time_passes", {"to": to}), Step("claim", {"how": Take(0, held=False)})]
    return steps


def _run(queue: ReferenceQueue, pool: actors.Pool, steps: list[Step]) -> tuple[Counter[str], str]:
    """Replay `steps` on `queue`; return the situations counted and the story told."""
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    lines: list[str] = []
    done = replay.replay(harness, steps, say=lines.append)
    assert done.skipped == [], done.skipped
    return harness.coverage, "\n".join(lines)


@pytest.mark.parametrize(
    ("queue", "old", "new"),
    [
        (Milliseconds(), "past-lease-end", "past-lease-end-ms"),
        (WholeSeconds(), "past-lease-end-ms", "past-lease-end-s"),
        (SecondsBothSides(), "past-lease-end-s", "past-lease-end-2s"),
    ],
    ids=lambda v: getattr(v, "name", v),
)
def test_a_rounded_lease_end_is_reclaimed_only_past_its_own_boundary(
    queue: Rounding, old: str, new: str, reference_pool: actors.Pool
) -> None:
    """Each resolution: the finer move leaves the expired job with its stalled owner, the
    move at the queue's own resolution hands it out again (token 2, to w1)."""
    counts, story = _run(queue, reference_pool, _stall_then_claim(old))
    assert counts[RECLAIMED] == 0, story
    assert "w1 claims job1" not in story and "w1 claim: nothing" in story
    counts, story = _run(queue, reference_pool, _stall_then_claim(new))
    assert counts[RECLAIMED] == 1, story
    assert "w1 claims job1 (token 2" in story
    # The stalled owner's completion at teardown is stale now, and refused.
    assert "w0 completes w0:job1#1: rejected" in story


def test_todays_moves_never_reclaim_from_a_whole_second_queue(reference_pool: actors.Pool) -> None:
    """Every move older than these (a microsecond off a lease end, a second, a heartbeat
    interval) leaves a whole-second lease running where the next claim looks: the
    situation never came up for such a queue. 2 s past the end hands it out."""
    for to in ("lease-end", "past-lease-end", "before-lease-end", "second", "beat"):
        counts, story = _run(SecondsBothSides(), reference_pool, _stall_then_claim(to))
        assert counts[RECLAIMED] == 0, (to, story)
    counts, _ = _run(SecondsBothSides(), reference_pool, _stall_then_claim("past-lease-end-2s"))
    assert counts[RECLAIMED] == 1


def test_a_coarse_move_reaches_an_end_the_clock_just_passed(reference_pool: actors.Pool) -> None:
    """A microsecond past the end, the rounded lease still runs; a move 2 s past it then
    goes to that same end plus 2 s (not the next end, nor a mere second on)."""
    steps = _stall_then_claim("past-lease-end", "past-lease-end-2s")
    counts, story = _run(SecondsBothSides(), reference_pool, steps)
    assert counts[RECLAIMED] == 1, story
    assert "w1 claim: nothing" in story and "w1 claims job1 (token 2" in story


def test_each_move_lands_where_it_says(reference_pool: actors.Pool) -> None:
    """On the reference: from a claim at 1 us (its lease ends at LEASE + 1 us), each move
    lands at its offset from that end; with no lease ahead, it moves a second on."""
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    end = LEASE + 1
    want = {
        "before-lease-end": end - 1,
        "lease-end": end,
        "past-lease-end": end + 1,
        "before-lease-end-ms": end - MILLISECOND,
        "past-lease-end-ms": end + MILLISECOND,
        "before-lease-end-s": end - SECOND,
        "past-lease-end-s": end + SECOND,
        "past-lease-end-2s": end + ROUNDED,
    }
    assert set(want) == set(NEAR_END) and set(want) <= set(TIMES)
    for to, at in want.items():
        harness.reset()
        d = Driver(harness)
        try:
            d.start(2)
            d.claim(Take(worker=0, held=False))
            assert d.core.lease_ends() == [end]
            d.pause(0)
            d.time_passes(to)
            assert d.core.now == at, to
        finally:
            d.teardown()
    harness.reset()
    d = Driver(harness)
    try:
        d.start(2)
        d.time_passes("past-lease-end-2s")  # nothing claimed: no lease ends ahead
        assert d.core.now == 1 + SECOND
    finally:
        d.teardown()


def test_the_rule_keeps_todays_moves_first() -> None:
    """Shrinking prefers a sampled value's first entries: today's moves keep their places."""
    assert TIMES[:5] == ("lease-end", "past-lease-end", "beat", "second", "before-lease-end")


def test_a_story_writes_times_to_the_microsecond() -> None:
    """A claim a microsecond past a lease end at 30 s reads as one: never `30s`, nor `1e-06s`."""
    times = [0, 1, 1_000, 30 * SECOND, 30 * SECOND + 1, 30 * SECOND - 1, 60 * SECOND + 1_000]
    assert [stamp(us) for us in times] == [
        "0s", "0.000001s", "0.001s", "30s", "30.000001s", "29.999999s", "60.001s",
    ]  # fmt: skip
