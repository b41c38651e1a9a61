"""Benchmark (not a test): what a failing run costs against the passing run of the fixed
queue.

    python -m bench.fail_ratio [--profile ci] [--rounds N] [--failing SPEC ...]
                               [-- EXTRA leasecheck check ARGUMENTS]

Each round runs `leasecheck check SPEC --profile P` once on the reference (it passes)
and once on each failing queue (mutants by default), each from an empty failure
directory of its own, with no seed and no CI in the environment, one after another.
Prints each failing queue's wall time against the median passing one and the length of
every program it told (`Failing program, N steps`), so a cheaper failure is seen not to
be a worse story.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.corpus_kills import LEASECHECK, REPO, _env

PASSING = "leasecheck.reference.queue:ReferenceQueue"
FAILING = (
    "mutants.check_then_act:CheckThenAct",
    "mutants.unfenced_heartbeat:UnfencedHeartbeat",
    "mutants.no_recovery:NoRecovery",
    "mutants.sweep_undoes:SweepUndoes",
)
_PROGRAM = re.compile(r"Failing program, (\d+) steps")


def run_once(spec: str, profile: str, extra: list[str]) -> tuple[float, int, list[int]]:
    """Run `leasecheck check` once; return its wall time, exit code and told programs' lengths."""
    with tempfile.TemporaryDirectory(prefix="leasecheck-ratio-") as tmp:
        command = [
            str(LEASECHECK), "check", spec, "--profile", profile,
            f"--leasecheck-dir={Path(tmp) / 'out'}", *extra,
        ]  # fmt: skip
        env = _env() | {"PYTHONPATH": str(REPO)}
        started = time.monotonic()
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - started
    return seconds, done.returncode, [int(n) for n in _PROGRAM.findall(done.stdout)]


def main(argv: list[str] | None = None) -> None:
    parse = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parse.add_argument("--profile", choices=("dev", "ci"), default="ci")
    parse.add_argument("--rounds", type=int, default=1, help="runs of each queue (1)")
    parse.add_argument("--failing", nargs="+", default=list(FAILING), metavar="SPEC")
    parse.add_argument("extra", nargs="*", help="more `leasecheck check` arguments, after --")
    args = parse.parse_args(argv)
    print(f"profile {args.profile}, load average {os.getloadavg()[0]:.2f} at start")
    passing: list[float] = []
    failing: dict[str, list[tuple[float, int, list[int]]]] = {s: [] for s in args.failing}
    for _ in range(args.rounds):
        seconds, code, _told = run_once(PASSING, args.profile, args.extra)
        print(f"{'reference (passing)':<44} {seconds:6.1f} s  exit {code}", flush=True)
        passing.append(seconds)
        for spec in args.failing:
            failing[spec].append(run_once(spec, args.profile, args.extra))
            seconds, code, told = failing[spec][-1]
            print(f"{spec:<44} {seconds:6.1f} s  exit {code}  programs {told}", flush=True)
    base = statistics.median(passing)
    print(f"passing median {base:.1f} s")
    for spec, runs in failing.items():
        walls = [r[0] for r in runs]
        failed = sum(r[1] == 1 for r in runs)
        ratio = statistics.median(walls) / base
        print(f"{spec:<44} median {statistics.median(walls):6.1f} s  {ratio:4.2f}x  "
              f"failed {failed}/{len(runs)}")  # fmt: skip


if __name__ == "__main__":
    main()
