"""Benchmark (not a test): the round trips each call of a library's own client sends.

    python -m bench.client_calls QUEUE [--repeat N] [--pg-dsn DSN] [--json PATH]

A queue that opens its own connections (`contract.Clients`) sends what its library
decides: a pool's check on checkout, a driver's prepare, a library's retry bookkeeping.
This plays one fixed story with such a queue, its client on an endpoint of the stepping
proxy as in a run, and counts the round trips (the proxy's units: a simple query, or an
extended-protocol batch up to Sync) each call sent: a worker claims a job, beats, and
completes it; claims the next and fails it; the sweep runs. It repeats the story `N`
times on the same clients and reports the first and the last round (a client's first
calls open its connections and prepare its statements), with the mean microseconds of a
call. Run it in the library's own environment, e.g. the matrix's venv:
`.leasecheck/envs/dramatiq-postgres-1.4.0/bin/python -m bench.client_calls
leasecheck.adapters.dramatiq_postgres_queue:DramatiqPostgresQueue`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg.conninfo import make_conninfo

from bench._db import reference_database
from leasecheck.proxy import Proxy
from leasecheck.proxy.endpoint import Endpoint
from leasecheck.stateful import clock, contract

LEASE = timedelta(seconds=30)
TICK = timedelta(microseconds=1)


class Counter:
    """The round trips and the time of each call, by the call's name."""

    def __init__(self) -> None:
        self.trips: dict[str, list[int]] = {}
        self.micros: dict[str, list[float]] = {}

    def count(self, name: str, endpoint: Endpoint, call: Callable[[], Any]) -> Any:
        before = sum(s.units_passed for s in endpoint.all_sessions())
        started = time.perf_counter()
        result = call()
        self.micros.setdefault(name, []).append((time.perf_counter() - started) * 1e6)
        after = sum(s.units_passed for s in endpoint.all_sessions())
        self.trips.setdefault(name, []).append(after - before)
        return result


def story(queue: Any, conn: Any, clients: dict[str, Any], ends: dict[str, Endpoint],
          counter: Counter) -> None:  # fmt: skip
    """One round: claim, beat, complete; claim, fail; sweep (the clock moved on between)."""
    queue.reset(conn)
    for _ in range(2):
        queue.enqueue(conn, {})
        clock.advance(conn, TICK)
    w, sweeper = clients["w1"], clients["sweeper"]
    claim = counter.count("claim", ends["w1"], lambda: queue.claim(w, "w1", LEASE))
    assert claim is not None, "the worker claimed nothing"
    counter.count("heartbeat", ends["w1"], lambda: queue.heartbeat(w, claim, LEASE))
    counter.count("complete", ends["w1"], lambda: queue.complete(w, claim, lambda c: None))
    second = counter.count("claim", ends["w1"], lambda: queue.claim(w, "w1", LEASE))
    assert second is not None, "the worker claimed nothing the second time"
    counter.count("fail", ends["w1"], lambda: queue.fail(w, second, "boom"))
    clock.advance(conn, LEASE * 2)
    if getattr(queue, "maintain", None) is not None:
        counter.count("maintain", ends["sweeper"], lambda: queue.maintain(sweeper))


def measure(spec: str, repeat: int, pg_dsn: str | None) -> dict[str, Any]:
    queue = contract.load(spec)
    if contract.clients(queue) is None:
        raise SystemExit(f"{spec}: it runs on the harness's connection (no connect/disconnect)")
    rounds: list[Counter] = []
    with reference_database(pg_dsn, queue) as dsn, Proxy(dsn) as proxy:
        conn = clock.connect(dsn)
        ends = {name: proxy.endpoint(name) for name in ("w1", "sweeper")}
        dsns = {n: make_conninfo(e.dsn(dsn), options=clock.OPTIONS) for n, e in ends.items()}
        clients = {name: queue.connect(name, dsns[name]) for name in ends}  # type: ignore[attr-defined]
        try:
            for _ in range(repeat):
                rounds.append(Counter())
                story(queue, conn, clients, ends, rounds[-1])
        finally:
            for client in clients.values():
                queue.disconnect(client)  # type: ignore[attr-defined]
            conn.close()
    first, last = rounds[0], rounds[-1]
    return {
        "queue": queue.name,
        "repeat": repeat,
        "first": {k: v for k, v in first.trips.items()},
        "last": {k: v for k, v in last.trips.items()},
        "micros": {
            k: round(
                sum(v for r in rounds for v in r.micros[k]) / sum(len(r.micros[k]) for r in rounds)
            )
            for k in last.micros
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("queue", help="module:attr of a queue that opens its own connections")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    found = measure(args.queue, args.repeat, args.pg_dsn)
    print(f"{found['queue']}: round trips per call, first round -> round {args.repeat}; mean us")
    for name, trips in found["last"].items():
        print(f"  {name:10} {found['first'][name]} -> {trips}   {found['micros'][name]} us")
    if args.json is not None:
        args.json.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    main()
