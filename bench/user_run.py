"""Benchmark: a queue author's `pytest -n auto` against `-n 0`, at the same total examples.

    python -m bench.user_run [--runs 3] [--profile ci] [--json PATH]

Runs pytest the way a queue's own repository does (a copy of `tests/data/myqueue`:
the adoption file, the queue named in its pyproject.toml) in a fresh process, once
with `-n 0` and once with `-n auto`, alternating, and reports wall-clock seconds and
the speed-up. The shards (`--leasecheck-shards`, 8 by default) are what `-n auto`
can spread over the cores; the examples in all are the profile's, either way.

Beside each run, the whole machine's busy CPU seconds (from /proc/stat, so the
server's backends count too) and the cores they kept busy on average. From them, the
ceiling: `-n auto` cannot end sooner than its CPU seconds spread over every core,
so `-n 0`'s time over that is the most any scheduling of the same work could give.
A speed-up goal above the ceiling needs less CPU per example, not better start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._cpu import machine_cpu

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "tests" / "data" / "myqueue"


def _once(project: Path, workers: str, profile: str, tmp: Path) -> tuple[float, float | None]:
    """Run pytest once; return its wall seconds and the machine's busy CPU seconds meanwhile."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEASECHECK_", "PYTEST_"))}
    env.update(LEASECHECK_PROFILE=profile, TMPDIR=str(tmp))
    env.pop("CI", None)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers]
    before = machine_cpu()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = machine_cpu()
    if done.returncode != 0:
        raise SystemExit(f"pytest -n {workers} failed:\n{done.stdout}{done.stderr}")
    return seconds, None if before is None or after is None else after - before


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-user-run.json"))
    args = parser.parse_args()
    times: dict[str, list[float]] = {"0": [], "auto": []}
    cpu: dict[str, list[float]] = {"0": [], "auto": []}
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="leasecheck-bench-") as scratch:
        tmp = Path(scratch)
        tmp.chmod(0o755)  # as root the embedded server runs as nobody, who must enter it
        project = tmp / "myqueue"
        shutil.copytree(PROJECT, project)
        for run in range(args.runs):
            for workers in ("0", "auto"):
                seconds, busy = _once(project, workers, args.profile, tmp)
                times[workers].append(seconds)
                line = f"run {run + 1}: -n {workers:<4} {seconds:6.1f} s"
                if busy is not None:
                    cpu[workers].append(busy)
                    line += f", CPU {busy:5.1f} s ({busy / seconds:.2f} cores busy)"
                print(line, flush=True)
    serial, parallel = statistics.median(times["0"]), statistics.median(times["auto"])
    print(f"median: -n 0 {serial:.1f} s, -n auto {parallel:.1f} s: {serial / parallel:.2f}x")
    summary: dict[str, Any] = {"profile": args.profile, "cores": cores, "seconds": times}
    if cpu["auto"]:
        floor = statistics.median(cpu["auto"]) / cores
        summary.update(cpu_seconds=cpu, ceiling=serial / floor)
        print(
            f"-n auto's CPU spread over {cores} cores takes {floor:.1f} s at least: "
            f"no scheduling of this work beats {serial / floor:.2f}x"
        )
    print(f"cores: {cores}, profile: {args.profile}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**summary, "speedup": serial / parallel}, indent=1))


if __name__ == "__main__":
    main()
