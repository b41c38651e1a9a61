"""Benchmark (not a test): the story's manual experiment against the suite, on the same bug.

    python -m bench.vs_manual [--scenario slow-job|paused-worker ...] [--length real|fast ...]
                              [--seeds 20] [--budget 3000] [--pg-dsn DSN] [--json PATH]

The manual way: `python -m leasecheck.reference.demo --scenario S --mode M [--fast]` starts real
worker processes, stops and resumes them with signals, and counts the receipts; for
these cells it must show two for one job. The slow job runs in the naive mode (no
heartbeat); the paused worker in the heartbeat mode (heartbeats, unfenced completion).
The suite's way, in the same run: the machine against the mutant with the same bug
(`naive`, `heartbeat-only`), as `bench.time_to_detect` runs it (random seeds, no
shrinking, server already up), median seconds to the first failure.

Ratio = the demo cell's own seconds (from its database being created to the receipts
counted; the command's wall time, which adds starting a server, is shown as well)
over the suite's median. Goal: 10 x or more. Both the story's 30 s lease (`real`) and
the demo's `--fast` 2 s lease are reported, separately. Runs one thing at a time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mutants
from bench._db import reference_database
from bench.time_to_detect import _p90, _run
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness

ROOT = Path(__file__).resolve().parent.parent
GOAL = 10.0
PAIRS = {
    "slow-job": ("naive", "naive"),
    "paused-worker": ("heartbeat", "heartbeat-only"),
}
"""Scenario -> (the demo's worker mode that shows two receipts, the mutant with that bug)."""


def demo(scenario: str, length: str, pg_dsn: str | None) -> dict[str, Any]:
    """Run one demo cell as a person would; return its times and the receipts it counted."""
    mode = PAIRS[scenario][0]
    with tempfile.TemporaryDirectory(prefix="leasecheck-vs-manual-") as tmp:
        out = Path(tmp) / "demo.json"
        command = [sys.executable, "-m", "leasecheck.reference.demo", "--scenario", scenario]
        command += ["--mode", mode, "--json", str(out)]
        command += ["--fast"] if length == "fast" else []
        command += ["--pg-dsn", pg_dsn] if pg_dsn else []
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        cells = json.loads(out.read_text())["cells"] if out.exists() else []
    cell = cells[0] if cells else {}
    problem = cell.get("problem") or ("" if cells else done.stderr.strip()[-300:])
    return {
        "scenario": scenario,
        "mode": mode,
        "length": length,
        "command_seconds": wall,
        "cell_seconds": cell.get("seconds"),
        "receipts": cell.get("receipts"),
        "double_receipt": cell.get("receipts") == 2,
        "problem": problem,
        "status": done.returncode,
    }


def suite(mutant: str, seeds: int, budget: int, pg_dsn: str | None) -> dict[str, Any]:
    """Time the machine to its first failure on `mutant` over `seeds` seeds."""
    start = time.perf_counter()
    with reference_database(pg_dsn) as dsn:
        pool = actors.Pool(dsn)
        try:
            harness = Harness(queue=contract.load(mutants.ALL[mutant]), pool=pool)
            harness.reset()
            setup = time.perf_counter() - start
            runs = [_run(harness, seed, budget) for seed in range(seeds)]
        finally:
            pool.close()
    killed = [r for r in runs if r["property"]]
    seconds = [r["seconds"] for r in killed] or [float("nan")]
    examples = [float(r["examples"]) for r in killed] or [float("nan")]
    return {
        "mutant": mutant,
        "setup_seconds": setup,
        "killed": len(killed),
        "seeds": seeds,
        "median_seconds": statistics.median(seconds),
        "p90_seconds": _p90(seconds),
        "median_examples": statistics.median(examples),
        "properties": sorted({r["property"] for r in killed}),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(PAIRS))
    parser.add_argument(
        "--length",
        action="append",
        choices=("real", "fast"),
        help="real: the story's 30 s lease (about a minute per cell); fast: --fast, 2 s",
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", type=int, default=3000)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-vs-manual.json"))
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    scenarios = args.scenario or list(PAIRS)
    lengths = args.length or ["fast", "real"]
    found = {s: suite(PAIRS[s][1], args.seeds, args.budget, args.pg_dsn) for s in scenarios}
    shown = [demo(s, length, args.pg_dsn) for length in lengths for s in scenarios]
    print(
        f"{'scenario':<14} {'demo mode':<10} {'lease':<5} {'cell s':>7} {'cmd s':>7} "
        f"{'rcpts':>5}  {'mutant':<15} {'killed':>7} {'med s':>6} {'p90 s':>6} "
        f"{'ratio':>7} {'e2e':>7}"
    )
    for d in shown:
        f = found[d["scenario"]]
        d["ratio"] = d["e2e_ratio"] = None
        if d["double_receipt"] and f["killed"]:
            d["ratio"] = d["cell_seconds"] / f["median_seconds"]
            d["e2e_ratio"] = d["command_seconds"] / (f["setup_seconds"] + f["median_seconds"])
        cell = "-" if d["cell_seconds"] is None else f"{d['cell_seconds']:.1f}"
        print(
            f"{d['scenario']:<14} {d['mode']:<10} {d['length']:<5} {cell:>7} "
            f"{d['command_seconds']:>7.1f} {d['receipts'] or '-':>5}  {f['mutant']:<15} "
            f"{f['killed']:>3}/{f['seeds']:<3} {f['median_seconds']:>6.2f} "
            f"{f['p90_seconds']:>6.2f} "
            + (
                f"{d['ratio']:>6.0f}x {d['e2e_ratio']:>6.0f}x"
                if d["ratio"] is not None
                else f"  n/a: {d['problem'] or 'no double receipt or mutant survived'}"
            )
        )
    print(
        f"ratio = demo cell s / suite median s (goal >= {GOAL:g} x); e2e = demo command s "
        "(with its server start) / (suite server start and schema + median); "
        f"suite: {args.seeds} seeds, up to {args.budget} examples, no shrinking"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"demo": shown, "suite": found, "goal": GOAL}, indent=1))


if __name__ == "__main__":
    main()
