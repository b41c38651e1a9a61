"""Benchmark (not a test): machine steps per second next to the round-trip floor.

    python -m bench.step_cost [--examples N] [--pg-dsn DSN] [--json PATH]

Runs the machine against the reference queue and, on the same kind of
connection in the same run, times a trivial query; prints both, the step cost as
a multiple of one round trip, and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from bench._db import reference_database
from stateful import actors, clock, contract
from stateful.machine import Harness, LeaseMachine


class _Counting(LeaseMachine):
    steps = 0
    examples = 0

    def __init__(self, harness: Harness) -> None:
        super().__init__(harness)
        _Counting.examples += 1

    def check_invariants(self, settings: Any, output: Any, runtimes: Any) -> None:
        _Counting.steps += 1
        super().check_invariants(settings, output, runtimes)


def _round_trip(dsn: str, n: int = 2000) -> float:
    with clock.connect(dsn) as conn:
        for _ in range(100):
            conn.execute("select 1").fetchone()
        start = time.perf_counter()
        for _ in range(n):
            conn.execute("select 1").fetchone()
        return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-step-cost.json"))
    args = parser.parse_args()
    with reference_database(args.pg_dsn) as dsn:
        queue = contract.load("reference.queue:ReferenceQueue")
        pool = actors.Pool(dsn)
        harness = Harness(queue=queue, pool=pool)
        harness.reset()
        floor = _round_trip(dsn)
        start = time.perf_counter()
        run_state_machine_as_test(
            lambda: _Counting(harness),  # type: ignore[arg-type]
            settings=settings(
                max_examples=args.examples,
                stateful_step_count=30,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
        elapsed = time.perf_counter() - start
        pool.close()
        result = {
            "examples": _Counting.examples,
            "steps": _Counting.steps,
            "seconds": elapsed,
            "steps_per_second": _Counting.steps / elapsed,
            "examples_per_second": _Counting.examples / elapsed,
            "round_trip_ms": floor * 1000,
            "step_cost_in_round_trips": (elapsed / _Counting.steps) / floor,
        }
        for key, value in result.items():
            print(f"{key:>26}: {value:.3f}" if isinstance(value, float) else f"{key:>26}: {value}")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
