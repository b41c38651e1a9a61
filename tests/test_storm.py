"""The reference queue under real concurrency: OS threads, one connection each."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta
from typing import Any, Literal

import psycopg
from hypothesis import given, settings
from hypothesis import strategies as st

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock
from leasecheck.stateful.contract import Claim

THREADS = 8
JOBS = 240
LEASE = timedelta(seconds=30)


def test_claim_storm_hands_each_job_to_exactly_one_thread(
    db: psycopg.Connection[Any], reference_dsn: str
) -> None:
    """Eight threads claim 240 jobs at once: every job once, none twice, all within the lease."""
    queue = ReferenceQueue()
    ids = {queue.enqueue(db, {"n": n}) for n in range(JOBS)}
    claims: list[Claim] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def work(name: str) -> None:
        try:
            with clock.connect(reference_dsn) as conn:
                start.wait()
                while (claim := queue.claim(conn, name, LEASE)) is not None:
                    with lock:
                        claims.append(claim)
        except BaseException as exc:  # surfaced below, never lost in a thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    counts = Counter(c.job_id for c in claims)
    assert set(counts) == ids
    assert max(counts.values()) == 1
    assert len({c.worker for c in claims}) > 1, "the storm never overlapped"
    leases = db.execute(
        "select count(*) from jobs where status = 'running' and lease_until = now() + %s", (LEASE,)
    ).fetchone()
    assert leases is not None and leases[0] == JOBS


_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
"""Typed as the Unicode category it names: mypy reads a bare ("Cs",) as tuple[str]."""

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(st.characters(exclude_characters="\x00", exclude_categories=_SURROGATES)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_characters="\x00", exclude_categories=_SURROGATES)),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=60)
@given(
    payload=st.dictionaries(
        st.text(max_size=8).filter(lambda k: "\x00" not in k), _JSON, max_size=5
    )
)
def test_payload_round_trips_through_jsonb(reference_dsn: str, payload: dict[str, Any]) -> None:
    """Whatever JSON jsonb can hold comes back from the queue exactly as it went in."""
    queue = ReferenceQueue()
    with clock.connect(reference_dsn) as conn, conn.transaction(force_rollback=True):
        job = queue.enqueue(conn, payload)
        row = queue.job(conn, job)
        assert row is not None and row["payload"] == payload
