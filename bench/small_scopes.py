"""Benchmark (not a test): what each small scope of the opening costs, and what it kills.

    python -m bench.small_scopes [--queue SPEC ...] [--mutant NAME ...] [--corpus NAME ...]

Searches every scope of `stateful.exhaustive.layer.SCOPES` within its budget (with
`--whole`, past it) on each queue named (default: the reference), and prints per scope
the schedules, the distinct states, the seconds, and the verdict: "whole", how deep it
was cut, or the property its shortest counterexample breaks.
"""

from __future__ import annotations

import argparse
import time

import mutants
from bench import corpus
from bench._db import reference_database
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.core import Harness
from leasecheck.stateful.exhaustive.layer import SCOPES
from leasecheck.stateful.exhaustive.search import explore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", action="append", default=[], help="module:attr")
    parser.add_argument("--mutant", action="append", default=[])
    parser.add_argument("--corpus", action="append", default=[])
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument(
        "--whole", action="store_true", help="search each scope whole, past its budget"
    )
    args = parser.parse_args()
    specs = [
        *args.queue,
        *(mutants.ALL[m] for m in args.mutant),
        *(str(corpus.ALL[c].spec) for c in args.corpus),
    ] or ["leasecheck.reference.queue:ReferenceQueue"]
    for spec in specs:
        with reference_database(args.pg_dsn, spec) as dsn:
            _search(spec, dsn, args.whole)


def _search(spec: str, dsn: str, whole: bool) -> None:
    """Search every scope on the queue `spec`, whose schema `dsn`'s database holds."""
    pool = actors.Pool(dsn)
    try:
        queue = contract.load(spec)
        harness = Harness(queue=queue, pool=pool)
        for i, (scope, budget) in enumerate(SCOPES):
            started = time.monotonic()
            done = explore(harness, scope, None, schedules=None if whole else budget)
            verdict = (
                done.violation.violation.prop
                if done.violation is not None
                else "whole"
                if done.complete
                else f"cut at {done.depth} of {scope.moves} moves"
            )
            print(
                f"{queue.name:32} scope {i + 1}: {done.schedules:6} schedules "
                f"(budget {budget}), {done.states:6} states, "
                f"{time.monotonic() - started:6.1f} s, {verdict}",
                flush=True,
            )
    finally:
        pool.close()


if __name__ == "__main__":
    main()
