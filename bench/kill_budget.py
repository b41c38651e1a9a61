"""Benchmark (not a test): the example at which each mutant dies in the kill test's search.

    python -m bench.kill_budget [--mutant NAME ...] [--pg-dsn DSN]

Runs the very search `properties/test_mutants.py` runs (its derandomized `KILL` budget,
through its own functions, so the same examples) and prints, per mutant, how many
examples it took (machines made, so also those Hypothesis discards and does not count
against `max_examples`) and on which property, then the last: the kill budget must stay
well above it. The mutants the test shows dead in a small scope (`IN_A_SCOPE`) are
searched too, to show how late the search alone reaches them.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mutants
from bench._db import reference_database
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors, isolation
from leasecheck.stateful.machine import Machine
from properties import test_mutants


@contextmanager
def _counted() -> Iterator[list[int]]:
    """Count the machines made (one an example) while the enclosed run goes."""
    made = [0]
    init = Machine.__init__

    def counting(self: Machine, *args: Any, **kwargs: Any) -> None:
        made[0] += 1
        init(self, *args, **kwargs)

    Machine.__init__ = counting  # type: ignore[method-assign]
    try:
        yield made
    finally:
        Machine.__init__ = init  # type: ignore[method-assign]


def _death(name: str, pool: actors.Pool) -> tuple[int, str]:
    queue = contract.load(mutants.ALL[name])
    isolated = getattr(queue, "isolation", isolation.DEFAULT) != isolation.DEFAULT
    search = test_mutants._violated_at if isolated else test_mutants._violated
    with _counted() as made:
        try:
            prop = search(queue, pool, test_mutants.KILL).violation.prop
        except BaseException as failed:  # pytest.fail: it survived the budget
            prop = f"survived ({type(failed).__name__})"
    return made[0], prop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutant", action="append", choices=sorted(mutants.ALL))
    parser.add_argument("--pg-dsn")
    args = parser.parse_args()
    names = args.mutant or sorted(mutants.ALL)
    budget = test_mutants.KILL.max_examples
    last = (0, "")
    with reference_database(args.pg_dsn) as dsn:
        pool = actors.Pool(dsn)
        try:
            for name in names:
                example, prop = _death(name, pool)
                scoped = " (the test: a small scope)" if name in test_mutants.IN_A_SCOPE else ""
                print(f"{name:24} example {example:4} of {budget}  {prop}{scoped}", flush=True)
                if not scoped:
                    last = max(last, (example, name))
        finally:
            pool.close()
    print(f"last to die in the search: {last[1]} at example {last[0]} of {budget}")


if __name__ == "__main__":
    main()
