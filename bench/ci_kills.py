"""Benchmark (not a test): does the `ci` profile, as a queue's CI runs it, kill each mutant?

    python -m bench.ci_kills [--mutant NAME ...] [--json PATH]

Each mutant gets the command a queue repository's CI runs (`CI=1 pytest
properties/test_machine.py --leasecheck-queue SPEC`, every shard, serially, stopping
at the first failing shard), with the isolation level and excused properties the
mutant declares (`isolation`, `excused`), as the kill test runs it. Prints, per
mutant, whether it died, on which property (read from the failure file the run left)
and the wall time; a run that failed
without a property's file is an ERROR (the harness's or Hypothesis's), never a kill.
It judges nothing: the kill tests in properties/ do, on a budget of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mutants
from leasecheck.stateful import contract
from leasecheck.stateful.engine import isolation

REPO = Path(__file__).resolve().parent.parent


def run(spec: str) -> dict[str, Any]:
    """Run the ci profile on `spec`; return whether, where and how fast it failed."""
    with tempfile.TemporaryDirectory(prefix="leasecheck-ci-kill-") as out:
        command = [
            sys.executable, "-m", "pytest", "-q", "-n", "0", "-x", "-p", "no:cacheprovider",
            "properties/test_machine.py", "-k", "test_leasecheck_properties",
            "--leasecheck-queue", spec, "--leasecheck-dir", out,
        ]  # fmt: skip
        queue = contract.load(spec)
        level = getattr(queue, "isolation", isolation.DEFAULT)
        if level != isolation.DEFAULT:
            command += ["--leasecheck-isolation", level]
        command += [f"--leasecheck-excuse={p}" for p in getattr(queue, "excused", ())]
        env = {**os.environ, "CI": "1"}
        started = time.monotonic()
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, check=False
        )
        seconds = time.monotonic() - started
        props = sorted({json.loads(p.read_text())["property"] for p in Path(out).glob("*.json")})
    errors = [ln for ln in done.stdout.splitlines() if ln.startswith(("E   ", "FAILED"))]
    return {
        "killed": done.returncode == 1 and bool(props),
        "properties": props,
        "seconds": seconds,
        "error": None if props or done.returncode == 0 else (errors or ["?"])[0][:200],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutant", action="append", choices=sorted(mutants.ALL))
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-ci-kills.json"))
    args = parser.parse_args()
    results = {}
    for name in args.mutant or sorted(mutants.ALL):
        results[name] = found = run(mutants.ALL[name])
        verdict = "killed" if found["killed"] else "ERROR" if found["error"] else "SURVIVED"
        props = ", ".join(found["properties"]) or (found["error"] or "")
        print(f"{name:<20} {verdict:<9} {found['seconds']:>6.1f} s  {props}")
        sys.stdout.flush()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
