"""Benchmark (not a test): what a machine step costs, next to the round trips it needs.

    python -m bench.step_cost [--examples N] [--without RULE,...] [--pg-dsn DSN] [--json PATH]

Runs the same derandomized examples against the reference queue twice: once with
every connection traced by libpq (`bench.wire`), to count the round trips a step
sends by kind, and once timed. In the same run it times a trivial query on the
same kind of connection (the round-trip floor) and the hollow machine
(`bench.hollow`: Hypothesis alone). The step cost is reported as a multiple of the
round trips the step needs (the queue's calls and the checks on them), and the
hollow machine says how much of it no harness could remove.

`--without claim_batch,complete_batch,sweep,preempt,resume_call` leaves out the rules
added since 2026-11-30 (their preconditions never hold), so the examples make the moves
that code made: a step of the same kind, costed side by side with it. Steps are not a
fixed unit of work (the moves and the driver have changed what one sends), so the
report also divides the time by the queue's own round trips: what a unit of the work
under test costs, comparable across versions.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings

from bench._db import reference_database
from bench.hollow import Hollow
from bench.wire import NEEDED, Wire
from leasecheck.proxy import Proxy
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, Machine, build


class _Counting(Machine):
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


GOAL = 2.0
"""A step should cost at most this multiple of the round trips its SQL needs."""

SETTINGS = settings(
    stateful_step_count=30,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def _hollow(examples: int) -> tuple[int, int, float]:
    """Run the hollow machine (Hypothesis alone) as `_run` runs the real one."""
    Hollow.steps = Hollow.examples = 0
    start = time.perf_counter()
    run_state_machine_as_test(Hollow, settings=settings(SETTINGS, max_examples=examples))
    return Hollow.examples, Hollow.steps, time.perf_counter() - start


def without(rules: list[str]) -> None:
    """Make the driver's `can_<rule>` predicates of `rules` never hold, for this process."""
    from leasecheck.stateful.engine.driver import Driver

    for rule in rules:
        name = f"can_{rule}"
        if not hasattr(Driver, name):
            raise SystemExit(f"no rule {rule!r} with a precondition: see stateful/machine.py")
        setattr(Driver, name, lambda self, *args: False)


def _run(dsn: str, examples: int, proxy: Proxy | None = None) -> tuple[int, int, float]:
    """Run the machine for `examples` examples (its sessions through `proxy`, preempted on
    the wire, if given); return examples, steps and seconds."""
    _Counting.steps = _Counting.examples = 0
    queue = contract.load("leasecheck.reference.queue:ReferenceQueue")
    pool = actors.Pool(dsn, proxy=proxy)
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    start = time.perf_counter()
    run_state_machine_as_test(
        lambda: build(shell=_Counting)(harness),
        settings=settings(SETTINGS, max_examples=examples),
    )
    elapsed = time.perf_counter() - start
    pool.close()
    return _Counting.examples, _Counting.steps, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--without", default="", help="comma-separated rules to leave out")
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-step-cost.json"))
    args = parser.parse_args()
    without([r for r in args.without.split(",") if r])
    with reference_database(args.pg_dsn) as dsn:
        wire = Wire()
        with wire.traced():  # the same derandomized examples, counted on the wire
            _, traced_steps, _ = _run(dsn, args.examples)
        floor = _round_trip(dsn)
        examples, steps, elapsed = _run(dsn, args.examples)
        floor = min(floor, _round_trip(dsn))
    if steps != traced_steps:
        raise SystemExit(f"the traced run took {traced_steps} steps, the timed one {steps}")
    _, hollow_steps, hollow_elapsed = _hollow(args.examples)
    kinds = {
        k: {"per_step": n / steps, "median_us": wire.median(k) * 1e6, "needed": k in NEEDED}
        for k, n in sorted(wire.counts.items())
    }
    needed = sum(v["per_step"] for v in kinds.values() if v["needed"])
    needed_sql = sum(v["per_step"] * v["median_us"] for v in kinds.values() if v["needed"])
    step = elapsed / steps
    result: dict[str, Any] = {
        "examples": examples,
        "steps": steps,
        "seconds": elapsed,
        "steps_per_second": steps / elapsed,
        "examples_per_second": examples / elapsed,
        "step_us": step * 1e6,
        "per_queue_round_trip_us": step * 1e6 / kinds["queue"]["per_step"],
        "round_trip_floor_us": floor * 1e6,
        "round_trips": kinds,
        "needed_round_trips_per_step": needed,
        "needed_round_trips_us": needed * floor * 1e6,
        "needed_sql_us": needed_sql,
        "hypothesis_alone_us": hollow_elapsed / hollow_steps * 1e6,
        "step_cost_vs_needed_round_trips": step / (needed * floor),
        "step_cost_vs_needed_sql": step * 1e6 / needed_sql,
        "goal": GOAL,
    }
    _print(result)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))


def _print(r: dict[str, Any]) -> None:
    print(
        f"{r['examples']} examples, {r['steps']} steps in {r['seconds']:.2f} s: "
        f"{r['steps_per_second']:,.0f} steps/s, {r['examples_per_second']:,.1f} examples/s"
    )
    print(f"\n{'round trips':<12} {'per step':>9} {'median us':>10}  needed")
    for k, v in r["round_trips"].items():
        needed = "yes" if v["needed"] else "no"
        print(f"{k:<12} {v['per_step']:>9.2f} {v['median_us']:>10.0f}  {needed}")
    print()
    floor = f"needed round trips x floor ({r['round_trip_floor_us']:.0f} us)"
    rows = [
        ("one step", r["step_us"]),
        ("per queue round trip (step / their count)", r["per_queue_round_trip_us"]),
        ("Hypothesis alone (hollow machine)", r["hypothesis_alone_us"]),
        (floor, r["needed_round_trips_us"]),
        ("needed round trips x their median", r["needed_sql_us"]),
    ]
    for label, us in rows:
        print(f"{label:<44} {us:>8,.0f} us")
    for name, ratio in (
        ("round trips x floor", r["step_cost_vs_needed_round_trips"]),
        ("round trips x their median", r["step_cost_vs_needed_sql"]),
    ):
        verdict = "met" if ratio <= GOAL else "not met"
        print(f"a step costs {ratio:.1f}x its needed {name} (goal {GOAL:g}x: {verdict})")
    print(
        f"Hypothesis alone costs {r['hypothesis_alone_us'] / r['needed_round_trips_us']:.1f}x "
        f"and {r['hypothesis_alone_us'] / r['needed_sql_us']:.1f}x of them"
    )


if __name__ == "__main__":
    main()
