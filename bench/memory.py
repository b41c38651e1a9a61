"""Benchmark (not a test): whether a long run's memory stays flat.

    python -m bench.memory [--examples 1000,5000] [--profile deep] [--shards 8] [--cache N]
                           [--pg-dsn DSN] [--json PATH]

Runs the machine against the reference queue for each number of examples, each in
a fresh process (so each peak is its own), with the profile's steps per example, no
example database and derandomized (the same examples every time), and reports the
process's peak resident set size. The examples are split over `--shards` runs one
after another, each with its share and its own seed, as the suite runs them (8 by
default); `--shards 1` makes them one run, as `--leasecheck-shards 1` would. Flat
means the peak at the larger count is about the peak at the smaller: nothing the
harness keeps per example (history, facts, sessions, coverage) piles up across
examples or runs, and Hypothesis's cache of the test cases it ran is bounded as the
suite bounds it (`stateful.engine.memory`; `--cache 0` runs with Hypothesis's own bound,
10,000, to show what the bound saves). Within one run, Hypothesis's tree of the
choices it tried still grows with the examples by design; the figure includes it.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from leasecheck.stateful.engine import memory


def _child(examples: int, profile: str, shards: int, cache: int, dsn: str | None) -> dict[str, Any]:
    """Run the machine in this process; return examples, steps, seconds and peak RSS."""
    from hypothesis import seed, settings

    from bench._db import reference_database
    from bench.step_cost import _Counting
    from leasecheck.stateful import contract
    from leasecheck.stateful.engine import actors, profiles
    from leasecheck.stateful.engine.literals import run_state_machine_as_test
    from leasecheck.stateful.machine import Harness, build
    from leasecheck.wing.shards import Shard

    budget = settings(profiles.budget(profile, None), max_examples=examples, derandomize=True)
    with reference_database(dsn) as url:
        pool = actors.Pool(url)
        harness = Harness(
            queue=contract.load("leasecheck.reference.queue:ReferenceQueue"), pool=pool
        )
        harness.reset()
        started = time.perf_counter()
        for shard in (Shard(k, shards) for k in range(shards)):
            machine = seed(shard.seed)(lambda: build(shell=_Counting)(harness))
            with memory.bounded(cache or 10**9):  # as the suite runs it, or Hypothesis's bound
                run_state_machine_as_test(machine, settings=shard.budget(budget))
        seconds = time.perf_counter() - started
        pool.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "examples": _Counting.examples,
        "steps": _Counting.steps,
        "seconds": seconds,
        "peak_rss_mib": peak_kib / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", default="1000,5000")
    parser.add_argument("--profile", default="deep")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--cache", type=int, default=None, help="0: Hypothesis's own bound")
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-memory.json"))
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        cache = memory.CACHE_SIZE if args.cache is None else args.cache
        print(json.dumps(_child(args.child, args.profile, args.shards, cache, args.pg_dsn)))
        return
    results = []
    for examples in (int(n) for n in args.examples.split(",")):
        command = [sys.executable, "-m", "bench.memory", "--child", str(examples)]
        command += ["--profile", args.profile] + (["--pg-dsn", args.pg_dsn] if args.pg_dsn else [])
        command += ["--shards", str(args.shards)]
        command += [] if args.cache is None else ["--cache", str(args.cache)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"the run of {examples} examples failed:\n{done.stdout}{done.stderr}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(result)
        result["shards"] = args.shards
        print(
            f"{result['examples']:>6} examples in {args.shards} runs, {result['steps']:>7} "
            f"steps in {result['seconds']:7.1f} s: peak RSS {result['peak_rss_mib']:7.1f} MiB"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
