"""Benchmark (not a test): which property kills each mutant, how fast, and how small.

    python -m bench.kill_matrix [--seeds 10] [--budget 1000] [--mutant NAME ...]
                                [--pg-dsn DSN] [--json PATH] [--markdown]

For every mutant in `mutants.ALL` and seed: the machine runs WITH shrinking, as a
user's failing run would. Per run it records the seconds and examples to the first
failure, the property that failure broke, the seconds spent shrinking, the property
finally reported and the length of the shrunk program (the rule steps Hypothesis
prints for the minimal example), and that length again after leasecheck deletes the
steps the failure does not need (`stateful.story.minimize`, as a failing run reports it).
Prints a mutant x property table with an "expected?" column (the reported property
is in the mutant's `expected`) and writes the runs as JSON. It judges nothing: the
kill tests in properties/ do that.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any, cast

import hypothesis.core
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import INITIALIZE_RULE_MARKER, RULE_MARKER

import mutants
from bench._db import reference_database
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine, Machine, build
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import minimize

_STEP = re.compile(r"^state\.(\w+)\(")


class _Run:
    """What one run has seen so far: examples made and the first failure."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.made = 0
        self.first: tuple[float, int, str] | None = None

    def failed(self, what: str) -> None:
        if self.first is None:
            self.first = (time.perf_counter() - self.start, self.made, what)


def _what(error: BaseException) -> str:
    if isinstance(error, PropertyViolated):
        return error.violation.prop
    return f"error:{type(error).__name__}"


class _Watched(Machine):
    """The machine, telling its run when it fails (in an invariant or at teardown)."""

    def __init__(self, harness: Harness, run: _Run) -> None:
        run.made += 1
        self.run = run
        super().__init__(harness)

    def check_invariants(self, settings: Any, output: Any, runtimes: Any) -> None:
        try:
            super().check_invariants(settings, output, runtimes)
        except Exception as error:
            self.run.failed(_what(error))
            raise

    def teardown(self) -> None:
        try:
            super().teardown()
        except Exception as error:
            self.run.failed(_what(error))
            raise


def _rule_names() -> frozenset[str]:
    """Return the names of the machine's rules (initialize rules too; not invariants)."""
    return frozenset(
        name
        for name, member in inspect.getmembers(LeaseMachine)
        if getattr(member, RULE_MARKER, None) or getattr(member, INITIALIZE_RULE_MARKER, None)
    )


def _shrunk_steps(error: BaseException) -> int:
    """Count the rule steps in the program Hypothesis printed for the minimal example.

    Hypothesis replays the minimal example last and attaches the program it printed to
    the error as notes; invariant and teardown lines there are not steps.
    """
    rules = _rule_names()
    return sum(
        1
        for text in getattr(error, "__notes__", ())
        for line in text.splitlines()
        if (m := _STEP.match(line.strip())) and m.group(1) in rules
    )


def run_one(harness: Harness, seed: int, budget: int) -> dict[str, Any]:
    """Run the machine once on `seed`, shrinking any failure; return what was measured."""
    run = _Run()
    hypothesis.core.global_force_seed = seed  # type: ignore[assignment]
    reported: str | None = None
    steps = 0
    try:
        run_state_machine_as_test(
            lambda: cast("type[_Watched]", build(shell=_Watched))(harness, run),
            settings=settings(
                max_examples=budget,
                stateful_step_count=30,
                deadline=None,
                database=None,
                phases=(Phase.generate, Phase.shrink),
                report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except Exception as error:
        reported = _what(error)
        steps = _shrunk_steps(error)
    finally:
        hypothesis.core.global_force_seed = None
    shorter = {m.prop: m.after for m in minimize.minimize_all(harness)} if reported else {}
    harness.recorder.last.clear()
    total = time.perf_counter() - run.start
    out: dict[str, Any] = {"seed": seed, "property": reported, "seconds_total": total}
    if run.first is not None and reported is not None:
        seconds, examples, first = run.first
        out.update(
            first_property=first,
            seconds=seconds,
            examples=examples,
            shrink_seconds=total - seconds,
            shrink_examples=run.made - examples,
            shrunk_steps=steps,
            minimized_steps=shorter.get(reported, steps),
        )
    else:
        out["examples"] = run.made
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarise(name: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return one row per property the mutant was reported on (or one 'survived' row)."""
    expected = tuple(getattr(contract.load(mutants.ALL[name]), "expected", ()))
    rows = []
    by_prop: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r["property"] is not None:
            by_prop.setdefault(r["property"], []).append(r)
    for prop, killed in sorted(by_prop.items(), key=lambda kv: -len(kv[1])):
        rows.append(
            {
                "mutant": name,
                "property": prop,
                "seeds": len(killed),
                "of": len(runs),
                "expected": prop in expected,
                "median_seconds": _median([r["seconds"] for r in killed]),
                "median_examples": _median([float(r["examples"]) for r in killed]),
                "median_shrink_seconds": _median([r["shrink_seconds"] for r in killed]),
                "median_shrunk_steps": _median([float(r["shrunk_steps"]) for r in killed]),
                "median_minimized_steps": _median(
                    [float(r.get("minimized_steps", r["shrunk_steps"])) for r in killed]
                ),
                "first_property_differs": sum(r["first_property"] != prop for r in killed),
            }
        )
    survived = len(runs) - sum(len(k) for k in by_prop.values())
    if survived:
        rows.append(
            {
                "mutant": name,
                "property": None,
                "seeds": survived,
                "of": len(runs),
                "expected": False,
            }
        )
    return rows


_HEADER = (
    f"{'mutant':<20} {'property':<18} {'seeds':>6} {'med s':>7} {'med ex':>7} "
    f"{'shrink s':>8} {'steps':>6} {'min':>4}  expected?"
)


def _line(row: dict[str, Any]) -> str:
    seeds = f"{row['seeds']}/{row['of']}"
    if row["property"] is None:
        return f"{row['mutant']:<20} {'(survived)':<18} {seeds:>6}"
    return (
        f"{row['mutant']:<20} {row['property']:<18} {seeds:>6} {row['median_seconds']:>7.2f} "
        f"{row['median_examples']:>7.0f} {row['median_shrink_seconds']:>8.2f} "
        f"{row['median_shrunk_steps']:>6.0f} {row['median_minimized_steps']:>4.0f}  "
        f"{'yes' if row['expected'] else 'NO'}"
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    """Return the README table: one row per mutant, its most frequent property first."""
    out = [
        "| mutant | property caught (seeds) | median s | median examples | median shrunk steps |",
        "|---|---|---:|---:|---:|",
    ]
    seen: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        seen.setdefault(row["mutant"], []).append(row)
    for name, mine in seen.items():
        killed = [r for r in mine if r["property"] is not None]
        caught = ", ".join(f"{r['property']} ({r['seeds']}/{r['of']})" for r in mine if r in killed)
        survived = [r for r in mine if r["property"] is None]
        if survived:
            caught += (
                f"{', ' if caught else ''}survived ({survived[0]['seeds']}/{survived[0]['of']})"
            )
        top = killed[0] if killed else None
        cells = (
            [
                f"{top['median_seconds']:.2f}",
                f"{top['median_examples']:.0f}",
                f"{top['median_shrunk_steps']:.0f}",
            ]
            if top
            else ["-", "-", "-"]
        )
        out.append(f"| {name} | {caught} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--mutant", action="append", choices=sorted(mutants.ALL))
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-kill-matrix.json"))
    parser.add_argument("--markdown", action="store_true", help="also print the README table")
    args = parser.parse_args()
    if args.seeds < 1 or args.budget < 1:
        parser.error("--seeds and --budget must be at least 1")
    started = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    with reference_database(args.pg_dsn) as dsn:
        pool = actors.Pool(dsn)
        try:
            print(_HEADER, flush=True)
            for name in args.mutant or sorted(mutants.ALL):
                harness = Harness(queue=contract.load(mutants.ALL[name]), pool=pool)
                harness.reset()
                runs[name] = [run_one(harness, seed, args.budget) for seed in range(args.seeds)]
                mine = summarise(name, runs[name])
                rows += mine
                for row in mine:
                    print(_line(row), flush=True)
                _write(args, rows, runs, time.perf_counter() - started)  # partial results survive
        finally:
            pool.close()
    wall = time.perf_counter() - started
    print(f"wall time {wall:.0f} s ({args.seeds} seeds, budget {args.budget})")
    if args.markdown:
        print()
        print(markdown(rows))
    _write(args, rows, runs, wall)


def _write(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    runs: dict[str, list[dict[str, Any]]],
    wall: float,
) -> None:
    args.json.parent.mkdir(parents=True, exist_ok=True)
    facts = {"seeds": args.seeds, "budget": args.budget, "wall_seconds": wall}
    args.json.write_text(json.dumps({**facts, "rows": rows, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
