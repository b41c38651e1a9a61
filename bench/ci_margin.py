"""Benchmark (not a test): by how much does the `ci` profile kill each mutant?

    python -m bench.ci_margin [--mutant NAME ...] [--corpus NAME ...] [--opening]
                              [--pg-dsn DSN] [--json PATH]

`bench.ci_kills` says whether `ci` kills a mutant, as a queue's CI runs it (pytest,
shrinking, stopping at the first failing shard). This runs every one of the 8 shards
of `ci` in this process, as the suite builds them (each shard's own seed and share of
the examples, the same machine), without shrinking, which decides nothing about
whether a shard fails, and counts the shards that kill. A mutant killed by 1 shard of
8 dies under `ci` by a thin margin: the next change to what the machine draws may
let it live. The derandomized shards make the count exact, not a sample. A shard
that ends in anything but a broken property is an ERROR, never a kill; a kill on a
property the mutant does not name is marked.

`--corpus NAME` counts the same for a queue of the foreign corpus (`bench.corpus`), each
on a database of its own with its own schema; a planted bug that names its properties
(`expected`, as a mutant does) gets its off-property kills marked. By default a shard
runs the search alone, as for the mutants; `--opening` has each shard play its share of
the opening's stories first, as `leasecheck check` does (a kill there is marked).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import Phase, seed, settings

import mutants
from bench import corpus
from bench.corpus import visibility_sql
from leasecheck.adapters.sqlfile_queue import SqlFileQueue
from leasecheck.dbfixtures import embedded, janitor
from leasecheck.stateful import clock, contract, opening
from leasecheck.stateful.engine import actors, isolation, memory, profiles
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, machine_for
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.wing.shards import DEFAULT_COUNT, Shard

BUDGET = settings(
    profiles.budget("ci", None),
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    report_multiple_bugs=False,
)
REFERENCE = "leasecheck.reference.queue:ReferenceQueue"
OPENING = " (opening)"
"""Marks a kill by one of the opening's stories, after the property it broke."""


def shard_verdict(harness: Harness, shard: Shard, opens: bool = False) -> str | None:
    """Run one `ci` shard (its share of the opening first, with `opens`); return the
    property it broke, None, or 'ERROR: ...'."""
    harness.reset()
    schedule = machine_for(harness.schedule, shard.index, harness.isolation)
    machine = seed(shard.seed)(lambda: schedule(harness))
    try:
        with memory.bounded():
            if opens:
                opening.play(harness, shard.index, shard.count)
            run_state_machine_as_test(machine, settings=shard.budget(BUDGET))
    except PropertyViolated as error:
        return error.violation.prop + (OPENING if harness.opening else "")
    except Exception as error:  # the harness's or Hypothesis's: never a kill
        return f"ERROR: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
    return None


def margin(
    pool: actors.Pool,
    queue: contract.Queue,
    expected: tuple[str, ...] | None,
    opens: bool = False,
) -> dict[str, Any]:
    """Return every shard's verdict on `queue`, and how many killed it; a kill on a
    property outside `expected` (when known) is off its property."""
    # A mutant only a stricter level reaches runs as its kill test runs it: at the level
    # it names (`--leasecheck-isolation`), with what the reference breaks there excused.
    harness = Harness(
        queue=queue,
        pool=pool,
        isolation=getattr(queue, "isolation", isolation.DEFAULT),
        excused=frozenset(getattr(queue, "excused", ())),
    )
    started = time.monotonic()
    verdicts = [
        shard_verdict(harness, Shard(k, DEFAULT_COUNT), opens) for k in range(DEFAULT_COUNT)
    ]
    kills = [v for v in verdicts if v is not None and not v.startswith("ERROR")]
    props = {v.removesuffix(OPENING) for v in kills}
    return {
        "shards": verdicts,
        "killed_by": len(kills),
        "off_property": sorted(props - set(expected)) if expected is not None else [],
        "errors": [v for v in verdicts if v is not None and v.startswith("ERROR")],
        "seconds": time.monotonic() - started,
    }


@contextmanager
def server(pg_dsn: str | None) -> Iterator[str]:
    """Yield the DSN of `pg_dsn`'s server, or of an embedded one started (and deleted) here."""
    started = None if pg_dsn else embedded.start()
    try:
        yield pg_dsn or (started.dsn if started else "")
    finally:
        if started is not None:
            started.stop()


@contextmanager
def database(server_dsn: str, queue: contract.Queue) -> Iterator[actors.Pool]:
    """Yield a pool on a fresh database with the harness and `queue`'s schema; drop it."""
    with janitor.temporary(server_dsn, "bench") as dsn:
        clock.prepare(dsn, queue)
        pool = actors.Pool(dsn)
        try:
            yield pool
        finally:
            pool.close()


def corpus_queue(name: str, workdir: Path) -> contract.Queue:
    """Return the corpus entry `name` as a queue (a `.sql` variant written into `workdir`)."""
    entry = corpus.ALL[name]
    if entry.spec is not None:
        return contract.load(entry.spec)
    if entry.sql_variant is None:
        return SqlFileQueue(visibility_sql.CLEAN)
    return SqlFileQueue(visibility_sql.write_variant(entry.sql_variant, workdir))


def _said(name: str, r: dict[str, Any]) -> str:
    shards = " ".join(f"{k + 1}:{v}" for k, v in enumerate(r["shards"]) if v)
    off = ", ".join(r["off_property"])
    off = f"  (not its own: {off})" if off else ""
    return f"{name:<20} {r['killed_by']}/{DEFAULT_COUNT} {r['seconds']:>6.1f} s  {shards}{off}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutant", action="append", choices=sorted(mutants.ALL))
    parser.add_argument("--corpus", action="append", choices=sorted(corpus.ALL))
    parser.add_argument("--opening", action="store_true", help="play the opening first")
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-ci-margin.json"))
    args = parser.parse_args()
    names = args.mutant or ([] if args.corpus else sorted(mutants.ALL))
    results = {}

    def run(name: str, pool: actors.Pool, queue: contract.Queue) -> None:
        expected = getattr(queue, "expected", None)
        results[name] = r = margin(pool, queue, expected, args.opening)
        print(_said(name, r))
        sys.stdout.flush()

    with server(args.pg_dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        if names:
            with database(dsn, contract.load(REFERENCE)) as pool:
                for name in names:  # every mutant runs on the reference's schema
                    run(name, pool, contract.load(mutants.ALL[name]))
        for name in args.corpus or []:
            queue = corpus_queue(name, Path(tmp))
            with database(dsn, queue) as pool:
                run(name, pool, queue)
    total = sum(r["killed_by"] for r in results.values())
    print(f"{total} of {DEFAULT_COUNT * len(results)} shard runs killed their queue")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
