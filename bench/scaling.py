"""Benchmark (not a test): how the suite scales with xdist, workers and steps per example.

    python -m bench.scaling [--repeats 3] [--pytest-arg ARG ...] [--profile NAME] [--no-suite]
                            [--examples 100] [--workers 2 3 4 5] [--steps 10 30 100] [--no-grid]
                            [--pg-dsn DSN] [--json PATH]

(a) The default suite, as CI runs it (`CI=1`, so the `ci` profile, from the repository
root with this Python: `python -m pytest`), under `-n auto` and `-n 0`: median wall
time of each over `--repeats` runs, taken alternately so that load on the machine hits
both alike, and the speed-up (goal: 1.7 x or more on 2 cores). Beside each run, the
whole machine's busy CPU seconds (from /proc/stat, so the server's count too), and the
speed-up the CPU that `-n auto` spends would allow were every core busy throughout.

(b) In-process against the reference queue, as `bench.step_cost` does: machine steps
and examples per second for each number of simulated workers and steps per example,
the grid repeated `--repeats` times in rotated order, medians reported, and the cost of
an example relative to 2 workers with the same steps. The machine draws its number of
workers in its `start` rule; a subclass here overrides that rule to draw one fixed
number (no change to the machine). If the machine has no `start(workers)` rule the
sweep over workers says so in one line and runs with the machine's own draw.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize

from bench._cpu import machine_cpu
from bench._db import reference_database
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine, Machine, build
from leasecheck.stateful.program import recorded

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.7


def _pytest(n: str, extra: list[str], profile: str | None) -> dict[str, Any]:
    """Run the suite once under `-n n`; return its wall time, CPU use and exit status."""
    env = {**os.environ, "CI": "1"}
    if profile:
        env["LEASECHECK_PROFILE"] = profile
    command = [sys.executable, "-m", "pytest", "-n", n, "-q", *extra]
    before = machine_cpu()
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = machine_cpu()
    tail = (done.stdout.strip().splitlines() or [""])[-1]
    run: dict[str, Any] = {"n": n, "seconds": seconds, "status": done.returncode, "summary": tail}
    if before is not None and after is not None:
        run["cpu_s"] = after - before
        run["busy_cores"] = run["cpu_s"] / seconds
    return run


def suite(repeats: int, extra: list[str], profile: str | None) -> dict[str, Any]:
    """Time the suite under -n auto and -n 0, alternating; print and return the medians."""
    runs: dict[str, list[dict[str, Any]]] = {"auto": [], "0": []}
    for i in range(repeats):
        for n in ("auto", "0") if i % 2 == 0 else ("0", "auto"):
            run = _pytest(n, extra, profile)
            runs[n].append(run)
            cpu = ""
            if "cpu_s" in run:
                cpu = f"  CPU {run['cpu_s']:5.1f} s ({run['busy_cores']:.2f} cores)"
            wall = f"{run['seconds']:7.1f} s"
            print(f"  -n {n:<4} {wall}{cpu}  exit {run['status']}  {run['summary']}")
    auto = statistics.median(r["seconds"] for r in runs["auto"])
    serial = statistics.median(r["seconds"] for r in runs["0"])
    failed = [r for rs in runs.values() for r in rs if r["status"] != 0]
    speedup = serial / auto
    print(
        f"suite: -n auto {auto:.1f} s, -n 0 {serial:.1f} s (medians of {repeats}); "
        f"speed-up {speedup:.2f} x on {os.cpu_count()} cores (goal >= {GOAL} x: "
        f"{'met' if speedup >= GOAL else 'not met'})"
    )
    result: dict[str, Any] = {
        "cores": os.cpu_count(),
        "auto_median_s": auto,
        "serial_median_s": serial,
        "speedup": speedup,
        "goal": GOAL,
        "runs": runs,
    }
    if all("cpu_s" in r for rs in runs.values() for r in rs):
        # However well -n auto splits the work, it cannot finish before all the CPU it
        # spends is spread over every core; the serial run sets the work's size.
        medians = {n: statistics.median(r["cpu_s"] for r in rs) for n, rs in runs.items()}
        result["cpu_median_s"] = medians
        result["speedup_ceiling"] = serial / (medians["auto"] / (os.cpu_count() or 1))
        print(
            f"CPU (the whole machine): -n 0 {medians['0']:.1f} s, -n auto {medians['auto']:.1f} s; "
            f"with every core busy, -n auto could reach {result['speedup_ceiling']:.2f} x"
        )
    if failed:
        print(f"warning: {len(failed)} run(s) exited non-zero; their times still count")
    return result


class _Counted(Machine):
    """The machine, counting examples and invariant checks (one per rule, plus one first)."""

    examples = 0
    checks = 0

    def __init__(self, harness: Harness) -> None:
        super().__init__(harness)
        _Counted.examples += 1

    def check_invariants(self, settings: Any, output: Any, runtimes: Any) -> None:
        _Counted.checks += 1
        super().check_invariants(settings, output, runtimes)


def worker_knob() -> str | None:
    """Return why the worker count cannot be fixed from outside, or None if it can."""
    start = getattr(LeaseMachine, "start", None)
    if start is None or not hasattr(start, "hypothesis_stateful_initialize_rule"):
        return "LeaseMachine has no initialize rule `start`"
    if "workers" not in inspect.signature(start).parameters:
        return "LeaseMachine.start takes no `workers` argument"
    return None


def _fixed(workers: int) -> type[Machine]:
    """Return the counting machine with `start` drawing exactly `workers` workers."""

    @initialize(workers=st.just(workers))
    @recorded
    def start(self: Machine, workers: int) -> None:
        self.d.start(workers)

    name = f"LeaseMachineWith{workers}Workers"
    return cast("type[Machine]", type(name, (build(shell=_Counted),), {"start": start}))


def _measure(
    harness: Harness, machine: type[Machine], examples: int, steps: int
) -> dict[str, float]:
    _Counted.examples = _Counted.checks = 0
    start = time.perf_counter()
    run_state_machine_as_test(
        lambda: machine(harness),
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
    seconds = time.perf_counter() - start
    rules = _Counted.checks - _Counted.examples
    return {
        "examples": _Counted.examples,
        "steps": rules,
        "seconds": seconds,
        "steps_per_second": rules / seconds,
        "examples_per_second": _Counted.examples / seconds,
    }


def grid(
    pg_dsn: str | None, workers: list[int], steps: list[int], examples: int, repeats: int
) -> dict[str, Any]:
    """Measure every (workers, steps) pair `repeats` times; print and return medians."""
    why = worker_knob()
    if why is not None:
        print(
            f"worker sweep skipped: {why}; it needs a knob such as a `workers: int | None` field "
            "on Harness that `start` draws from; running with the machine's own draw (2-5)"
        )
    machines = {w: _fixed(w) for w in workers} if why is None else {0: build(shell=_Counted)}
    cells = [(w, s) for w in machines for s in steps]
    raw: dict[str, list[dict[str, float]]] = {f"{w}x{s}": [] for w, s in cells}
    with reference_database(pg_dsn) as dsn:
        pool = actors.Pool(dsn)
        try:
            harness = Harness(
                queue=contract.load("leasecheck.reference.queue:ReferenceQueue"), pool=pool
            )
            harness.reset()
            _measure(harness, machines[cells[0][0]], 20, cells[0][1])  # warm-up, not counted
            for r in range(repeats):
                shift = r % len(cells)
                for w, s in cells[shift:] + cells[:shift]:
                    raw[f"{w}x{s}"].append(_measure(harness, machines[w], examples, s))
        finally:
            pool.close()
    medians = {
        key: {k: statistics.median(run[k] for run in runs) for k in runs[0]}
        for key, runs in raw.items()
    }
    print(
        f"{'workers':>7} {'max steps':>9} {'steps run':>9} {'steps/s':>8} {'ex/s':>7} "
        f"{'s/ex vs fewest workers':>23}"
    )
    for w, s in cells:
        m = medians[f"{w}x{s}"]
        base = medians.get(f"{min(machines)}x{s}", m)
        m["example_cost_vs_fewest_workers"] = base["examples_per_second"] / m["examples_per_second"]
        print(
            f"{w or '2-5':>7} {s:>9} {m['steps'] / m['examples']:>9.1f} "
            f"{m['steps_per_second']:>8.0f} {m['examples_per_second']:>7.1f} "
            f"{m['example_cost_vs_fewest_workers']:>23.2f}"
        )
    return {"examples": examples, "repeats": repeats, "medians": medians, "raw": raw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        help="pass this argument on to pytest (repeatable), e.g. a test path for a smoke run",
    )
    parser.add_argument(
        "--profile", default=None, help="LEASECHECK_PROFILE for the suite runs (default: ci)"
    )
    parser.add_argument("--no-suite", action="store_true", help="skip (a), the pytest runs")
    parser.add_argument("--no-grid", action="store_true", help="skip (b), the in-process grid")
    parser.add_argument("--examples", type=int, default=100, help="examples per grid cell")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3, 4, 5])
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 30, 100])
    parser.add_argument("--pg-dsn", default=None, help="grid only; the suite finds its own")
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-scaling.json"))
    args = parser.parse_args()
    if args.repeats < 1 or args.examples < 1:
        parser.error("--repeats and --examples must be at least 1")
    if min(args.workers) < 1 or min(args.steps) < 1:
        parser.error("--workers and --steps take numbers of at least 1, e.g. --workers 2 3 4 5")
    result: dict[str, Any] = {}
    if not args.no_suite:
        print(f"(a) the suite, CI=1, {args.repeats} x each of -n auto and -n 0")
        result["suite"] = suite(args.repeats, args.pytest_arg, args.profile)
    if not args.no_grid:
        print(f"(b) in process, reference queue, {args.examples} examples per cell")
        result["grid"] = grid(args.pg_dsn, args.workers, args.steps, args.examples, args.repeats)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
