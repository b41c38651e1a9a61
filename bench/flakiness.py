"""Benchmark (not a test): does the machine ever fail the reference queue? Over random seeds.

    python -m bench.flakiness [--runs 30] [--profile ci] [--examples N] [--seed N ...]
                              [--queue module:attr]

Each run is the machine of `properties/test_machine.py` under the profile's budget
(examples, or `--examples`; steps; shrinking) but with a fresh random seed instead of the profile's
derandomized one, all in this process on one embedded server (or `--pg-dsn`). A
failure is a bug in the reference queue or in the harness; it is printed with its
seed (`--seed N` replays it) and every run goes into a JSON file. Goal: 0 failures.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import traceback
from pathlib import Path
from typing import Any

import hypothesis.core
from hypothesis import settings

from bench._db import reference_database
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors, profiles
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine, Machine
from leasecheck.stateful.properties import PropertyViolated


def _run(harness: Harness, seed: int, profile: settings) -> dict[str, Any]:
    made = 0

    def factory() -> Machine:
        nonlocal made
        made += 1
        return LeaseMachine(harness)

    # A derandomized profile ignores the forced seed, so randomness is switched back on.
    chosen = settings(profile, derandomize=False, database=None)
    hypothesis.core.global_force_seed = seed  # type: ignore[assignment]
    start = time.perf_counter()
    error: str | None = None
    prop = None
    try:
        run_state_machine_as_test(factory, settings=chosen)
    except PropertyViolated as exc:
        prop, error = exc.violation.prop, str(exc)
    except ExceptionGroup as group:  # several distinct bugs, reported together
        found = [e for e in group.exceptions if isinstance(e, PropertyViolated)]
        if len(found) == len(group.exceptions):
            prop = ", ".join(sorted({e.violation.prop for e in found}))
        error = "".join(traceback.format_exception(group))
    except Exception as exc:
        error = "".join(traceback.format_exception(exc))
    finally:
        hypothesis.core.global_force_seed = None
        harness.recorder.last.clear()
    return {
        "seed": seed,
        "failed": error is not None,
        "property": prop,
        "error": error,
        "machines": made,
        "seconds": round(time.perf_counter() - start, 3),
    }


def _write(path: Path, args: argparse.Namespace, runs: list[dict[str, Any]], wall: float) -> None:
    """Write every run so far (an interrupted benchmark keeps what it measured)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    failed = sum(r["failed"] for r in runs)
    summary = {
        "queue": args.queue,
        "profile": args.profile,
        "examples": args.examples,
        "wall_seconds": round(wall, 1),
    }
    path.write_text(json.dumps({**summary, "failed": failed, "runs": runs}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--profile", default="ci", choices=sorted(profiles.PROFILES))
    parser.add_argument(
        "--examples", type=int, default=None, help="examples a run (default: the profile's)"
    )
    parser.add_argument("--seed", type=int, action="append", help="replay this seed (repeatable)")
    parser.add_argument(
        "--queue", default="leasecheck.reference.queue:ReferenceQueue", metavar="MODULE:ATTR"
    )
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-flakiness.json"))
    args = parser.parse_args()
    profile = profiles.budget(args.profile, None)
    if args.examples is not None:
        profile = settings(profile, max_examples=args.examples)
    seeds = args.seed or [random.getrandbits(64) for _ in range(args.runs)]
    started = time.perf_counter()
    runs = []
    with reference_database(args.pg_dsn, args.queue) as dsn:
        pool = actors.Pool(dsn)
        try:
            harness = Harness(queue=contract.load(args.queue), pool=pool)
            harness.reset()
            for n, seed in enumerate(seeds, 1):
                run = _run(harness, seed, profile)
                runs.append(run)
                verdict = f"FAILED on {run['property'] or 'an error'}" if run["failed"] else "ok"
                print(f"{n:>3}/{len(seeds)} seed {seed:<20} {run['seconds']:>7.2f}s  {verdict}")
                if run["failed"]:
                    print(f"    {run['error']}".replace("\n", "\n    "), flush=True)
                _write(args.json, args, runs, time.perf_counter() - started)
        finally:
            pool.close()
    wall = time.perf_counter() - started
    failed = [r for r in runs if r["failed"]]
    print(
        f"{args.queue} under --profile {args.profile}: {len(failed)} of {len(runs)} runs "
        f"failed in {wall:.1f} s wall"
    )
    for r in failed:
        print(f"  replay: python -m bench.flakiness --profile {args.profile} --seed {r['seed']}")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
