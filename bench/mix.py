"""Benchmark (not a test): the rule mix and the situations a `ci` shard produces.

    python -m bench.mix [--shards N] [--pg-dsn DSN] [--json PATH]

Runs the first N shards of the `ci` profile (derandomized: the run CI makes) against
the reference queue in this process and prints how often each move was made and each
dangerous situation (`stateful.verdict.coverage`) occurred, then the per-property summary a
run ends with. A move that is rarely made is a move whose races are rarely reached.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hypothesis import seed

from bench._db import reference_database
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors, profiles
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.verdict import coverage
from leasecheck.wing.shards import Shard


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--pg-dsn")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    budget = profiles.budget("ci", None)
    with reference_database(args.pg_dsn) as dsn:
        pool = actors.Pool(dsn)
        harness = Harness(
            queue=contract.load("leasecheck.reference.queue:ReferenceQueue"), pool=pool
        )
        try:
            for k in range(args.shards):
                shard = Shard(k, 8)
                harness.reset()
                machine = seed(shard.seed)(lambda: LeaseMachine(harness))
                run_state_machine_as_test(machine, settings=shard.budget(budget))
        finally:
            pool.close()
    total = sum(harness.moves.values())
    print(f"moves ({total} in {args.shards} shards of ci):")
    for rule, n in harness.moves.most_common():
        print(f"  {rule:18} {n:6}  {100 * n / total:5.1f}%")
    print("situations:")
    for name, n in harness.coverage.most_common():
        print(f"  {name:38} {n:6}")
    for line in coverage.summary(harness.coverage):
        print(f"  {line}")
    if args.json:
        args.json.write_text(
            json.dumps({"moves": harness.moves, "situations": harness.coverage}, indent=1)
        )


if __name__ == "__main__":
    main()
