"""Benchmark (not a test): what each small scope of the opening costs, and what it kills.

    python -m bench.small_scopes [--queue SPEC ...] [--mutant NAME ...] [--corpus NAME ...]
        [--all] [--scope N ...] [--whole] [--until-killed]

Searches every scope of `stateful.exhaustive.layer.SCOPES` within its budget (with
`--whole`, past it) on each queue named (default: the reference), and prints per scope
the schedules, the distinct states, the seconds, and the verdict: "whole", how deep it
was cut, or the property its shortest counterexample breaks.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import mutants
from bench import corpus
from bench._db import reference_database
from leasecheck.adapters.sqlfile_queue import SqlFileQueue
from leasecheck.stateful import contract
from leasecheck.stateful.contract import Queue
from leasecheck.stateful.engine import actors
from leasecheck.stateful.exhaustive.layer import SCOPES
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.harness import Harness


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", action="append", default=[], help="module:attr")
    parser.add_argument("--mutant", action="append", default=[])
    parser.add_argument("--corpus", action="append", default=[])
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument(
        "--whole", action="store_true", help="search each scope whole, past its budget"
    )
    parser.add_argument(
        "--until-killed", action="store_true", help="stop a queue's scopes at its first kill"
    )
    parser.add_argument("--all", action="store_true", help="every mutant and every corpus variant")
    parser.add_argument(
        "--scope", action="append", type=int, default=[], help="only scope N (from 1); repeat"
    )
    args = parser.parse_args()
    if args.all:
        args.mutant += sorted(mutants.ALL)
        args.corpus += sorted(corpus.VARIANTS)
    with tempfile.TemporaryDirectory() as workdir:
        queues = [
            *(contract.load(q) for q in args.queue),
            *(contract.load(mutants.ALL[m]) for m in args.mutant),
            *(_corpus(corpus.ALL[c], Path(workdir)) for c in args.corpus),
        ] or [contract.load("leasecheck.reference.queue:ReferenceQueue")]
        for queue in queues:
            with reference_database(args.pg_dsn, queue) as dsn:
                _search(queue, dsn, args.whole, args.scope, args.until_killed)


def _corpus(entry: corpus.Entry, workdir: Path) -> Queue:
    """Return the corpus queue `entry` names: its class, or its `.sql` file loaded."""
    if entry.spec is not None:
        return contract.load(entry.spec)
    (sql,) = entry.target(workdir)[1:]
    return SqlFileQueue(sql)


def _search(queue: Queue, dsn: str, whole: bool, only: list[int], until_killed: bool) -> None:
    """Search every scope on `queue`, whose schema `dsn`'s database holds."""
    pool = actors.Pool(dsn)
    try:
        harness = Harness(queue=queue, pool=pool)
        for i, (scope, budget) in enumerate(SCOPES):
            if only and i + 1 not in only:
                continue
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
            if until_killed and done.violation is not None:
                break
    finally:
        pool.close()


if __name__ == "__main__":
    main()
