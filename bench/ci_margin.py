"""Benchmark (not a test): by how much does the `ci` profile kill each mutant?

    python -m bench.ci_margin [--mutant NAME ...] [--pg-dsn DSN] [--json PATH]

`bench.ci_kills` says whether `ci` kills a mutant, as a queue's CI runs it (pytest,
shrinking, stopping at the first failing shard). This runs every one of the 8 shards
of `ci` in this process, as the suite builds them (each shard's own seed and share of
the examples, the same machine), without shrinking, which decides nothing about
whether a shard fails, and counts the shards that kill. A mutant killed by 1 shard of
8 dies under `ci` by a thin margin: the next change to what the machine draws may
let it live. The derandomized shards make the count exact, not a sample. A shard
that ends in anything but a broken property is an ERROR, never a kill; a kill on a
property the mutant does not name is marked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test

import mutants
from bench._db import reference_database
from leasecheck.shards import DEFAULT_COUNT, Shard
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors, memory, profiles
from leasecheck.stateful.machine import Harness, machine_for
from leasecheck.stateful.properties import PropertyViolated

BUDGET = settings(
    profiles.budget("ci", None),
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    report_multiple_bugs=False,
)


def shard_verdict(harness: Harness, shard: Shard) -> str | None:
    """Run one `ci` shard; return the property it broke, None, or 'ERROR: ...'."""
    harness.reset()
    schedule = machine_for(harness.schedule, shard.index)
    machine = seed(shard.seed)(lambda: schedule(harness))
    try:
        with memory.bounded():
            run_state_machine_as_test(machine, settings=shard.budget(BUDGET))  # type: ignore[arg-type]
    except PropertyViolated as error:
        return error.violation.prop
    except Exception as error:  # the harness's or Hypothesis's: never a kill
        return f"ERROR: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
    return None


def margin(pool: actors.Pool, name: str) -> dict[str, Any]:
    """Return every shard's verdict on mutant `name`, and how many killed it."""
    queue = contract.load(mutants.ALL[name])
    expected = queue.expected  # type: ignore[attr-defined]
    harness = Harness(queue=queue, pool=pool)
    started = time.monotonic()
    verdicts = [shard_verdict(harness, Shard(k, DEFAULT_COUNT)) for k in range(DEFAULT_COUNT)]
    kills = [v for v in verdicts if v is not None and not v.startswith("ERROR")]
    return {
        "shards": verdicts,
        "killed_by": len(kills),
        "off_property": sorted({v for v in kills if v not in expected}),
        "errors": [v for v in verdicts if v is not None and v.startswith("ERROR")],
        "seconds": time.monotonic() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutant", action="append", choices=sorted(mutants.ALL))
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-ci-margin.json"))
    args = parser.parse_args()
    results = {}
    with reference_database(args.pg_dsn) as dsn:
        pool = actors.Pool(dsn)
        try:
            for name in args.mutant or sorted(mutants.ALL):
                results[name] = r = margin(pool, name)
                shards = " ".join(f"{k + 1}:{v}" for k, v in enumerate(r["shards"]) if v)
                off = ", ".join(r["off_property"])
                off = f"  (not its own: {off})" if off else ""
                print(
                    f"{name:<20} {r['killed_by']}/{DEFAULT_COUNT} {r['seconds']:>6.1f} s  "
                    f"{shards}{off}"
                )
                sys.stdout.flush()
        finally:
            pool.close()
    total = sum(r["killed_by"] for r in results.values())
    print(f"{total} of {DEFAULT_COUNT * len(results)} shard runs killed their mutant")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
