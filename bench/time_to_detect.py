"""Benchmark (not a test): how fast the machine kills each mutant, over many seeds.

    python -m bench.time_to_detect [--seeds 20] [--budget 3000] [--mutant NAME ...]
                                   [--queue module:attr ...] [--schedule random|pct] [--target]

For every mutant and seed: examples and seconds to the first failure (no
shrinking), and the property it broke. A seed that ends in an error of the harness
(not a broken property) is recorded as such and counts as no kill. Prints median
and p90 per mutant and writes the raw runs as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import hypothesis.core
import psycopg
from hypothesis import HealthCheck, Phase, settings, target

import mutants
from bench._db import reference_database
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import SCHEDULES, Harness, Machine, machine_for
from leasecheck.stateful.properties import PropertyViolated


class _Targeting(Machine):
    """The machine reporting, at each example's end, how many distinct dangerous
    situations it produced, as Hypothesis's `target()`: an experiment, not the suite's."""

    def teardown(self) -> None:
        target(float(len(self.d.core.oracle.ledger.situations)), label="distinct situations")
        super().teardown()


def _run(
    harness: Harness, seed: int, budget: int, schedule: str = "random", aim: bool = False
) -> dict[str, Any]:
    made = 0
    machine = machine_for(schedule, shell=_Targeting if aim else Machine)

    def factory() -> Machine:
        nonlocal made
        made += 1
        return machine(harness)

    hypothesis.core.global_force_seed = seed  # type: ignore[assignment]
    start = time.perf_counter()
    prop = error = None
    try:
        run_state_machine_as_test(
            factory,
            settings=settings(
                max_examples=budget,
                stateful_step_count=30,
                deadline=None,
                database=None,
                phases=(Phase.generate, Phase.target) if aim else (Phase.generate,),
                report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except PropertyViolated as violated:
        prop = violated.violation.prop
    except Exception as exc:  # the harness's own failure: recorded, never a kill
        first = (str(exc).strip().splitlines() or [""])[0]
        error = f"{type(exc).__name__}: {first}"
    finally:
        hypothesis.core.global_force_seed = None
    seconds = time.perf_counter() - start
    # A failure is replayed once before it is reported: that replay is not a new example.
    return {
        "seed": seed,
        "property": prop,
        "examples": made - 1 if prop else made,
        "seconds": seconds,
        "error": error,
    }


def _install(queue: contract.Queue, dsn: str) -> None:
    """Install a queue beside the reference schema, unless its tables are already there."""
    with clock.connect(dsn) as conn:
        try:
            with conn.transaction():
                queue.install(conn)
        except psycopg.errors.DuplicateTable:
            pass  # the reference's schema, which the mutants share


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=3000)
    parser.add_argument("--mutant", action="append", choices=sorted(mutants.ALL))
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        help="also run this module:attr (e.g. the reference, which must never be killed)",
    )
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="random")
    parser.add_argument(
        "--target",
        action="store_true",
        help="aim with target() on the distinct situations an example produced",
    )
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-time-to-detect.json"))
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {}
    with reference_database(args.pg_dsn) as dsn:
        pool = actors.Pool(dsn)
        try:
            print(
                f"{'mutant':<20} {'killed':>7} {'med ex':>7} {'p90 ex':>7} {'med s':>7} "
                f"{'p90 s':>7}  properties"
            )
            targets = {name: mutants.ALL[name] for name in args.mutant or sorted(mutants.ALL)}
            targets.update({spec: spec for spec in args.queue})
            for name, spec in targets.items():
                harness = Harness(queue=contract.load(spec), pool=pool)
                _install(harness.queue, dsn)
                harness.reset()
                runs[name] = [
                    _run(harness, seed, args.budget, args.schedule, args.target)
                    for seed in range(args.seeds)
                ]
                killed = [r for r in runs[name] if r["property"]]
                examples = [float(r["examples"]) for r in killed] or [float("nan")]
                seconds = [r["seconds"] for r in killed] or [float("nan")]
                props = sorted({r["property"] for r in killed})
                errors = [r for r in runs[name] if r["error"]]
                if errors:
                    props.append(
                        f"{len(errors)} seeds ended in a harness error: {errors[0]['error']}"
                    )
                print(
                    f"{name:<20} {len(killed):>3}/{len(runs[name]):<3} "
                    f"{statistics.median(examples):>7.0f} {_p90(examples):>7.0f} "
                    f"{statistics.median(seconds):>7.2f} {_p90(seconds):>7.2f}  "
                    f"{', '.join(props)}",
                    flush=True,
                )
        finally:
            pool.close()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
