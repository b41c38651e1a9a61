"""Benchmark (not a test): how often `leasecheck check` finds the plain bugs of queues
written from the README, not derived from the reference.

    python -m bench.corpus_kills [--runs N] [--profile dev|ci] [--only NAME ...] [--json PATH]

Every queue of `bench.corpus` (the clean ones and each planted bug) gets N fresh runs of
the command a user types, `leasecheck check QUEUE --profile P` (or `--sql FILE`), each
with no seed and an empty failure directory of its own (so `dev` keeps no example from
an earlier run), from the repository's root. A run is killed when it exits 1 and left
a property's failure file (the property is read from it), passed when it exits 0, and
an ERROR otherwise (the harness's, never a kill). A clean queue must pass every run.
Prints one line per queue and writes every run as JSON.
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

from bench.corpus import ALL, QUEUES, Entry

REPO = Path(__file__).resolve().parent.parent
LEASECHECK = Path(sys.executable).with_name("leasecheck")


def _env() -> dict[str, str]:
    """The environment of a user's shell: no leasecheck settings, no CI."""
    drop = ("LEASECHECK_", "PYTEST_", "HYPOTHESIS_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.pop("CI", None)
    return env


def run_once(entry: Entry, profile: str) -> dict[str, Any]:
    """Run `leasecheck check` once on `entry`; return its verdict, properties and time."""
    with tempfile.TemporaryDirectory(prefix="leasecheck-corpus-") as tmp:
        out = Path(tmp) / "out"
        command = [
            str(LEASECHECK), "check", *entry.target(Path(tmp)),
            "--profile", profile, f"--leasecheck-dir={out}",
        ]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(
            command, cwd=REPO, env=_env(), capture_output=True, text=True, check=False
        )
        seconds = time.monotonic() - started
        props = sorted({json.loads(p.read_text())["property"] for p in out.glob("*.json")})
    if done.returncode == 1 and props:
        verdict = "killed"
    elif done.returncode == 0:
        verdict = "passed"
    else:
        verdict = "error"
    tail = [ln for ln in done.stdout.splitlines() if ln.startswith(("E ", "FAILED", "leasecheck:"))]
    told = [
        ln.strip()
        for ln in done.stdout.splitlines()
        if ln.lstrip().startswith(tuple(f"[{p}]" for p in props))
    ]
    return {
        "verdict": verdict,
        "headline": told[0] if told else None,
        "properties": props,
        "seconds": round(seconds, 2),
        "returncode": done.returncode,
        "load": round(os.getloadavg()[0], 2),
        "error": None
        if verdict != "error"
        else (tail or done.stderr.splitlines() or ["?"])[-1][:300],
    }


def summary(name: str, runs: list[dict[str, Any]]) -> str:
    """One line: kills out of runs, the properties, the wall times."""
    kills = [r for r in runs if r["verdict"] == "killed"]
    errors = [r for r in runs if r["verdict"] == "error"]
    props = sorted({p for r in kills for p in r["properties"]})
    seconds = sorted(r["seconds"] for r in runs)
    median = seconds[len(seconds) // 2]
    note = ", ".join(props)
    if errors:
        note += f"  ERRORS {len(errors)}: {errors[0]['error']}"
    if name in QUEUES and kills:
        note += "  (a clean queue was killed: a false alarm or a bug of the corpus)"
    return (
        f"{name:<36} {len(kills):>2}/{len(runs):<2} killed  median {median:6.1f} s  "
        f"max {seconds[-1]:6.1f} s  {note}"
    )


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parse.add_argument("--runs", type=int, default=5, help="fresh runs per queue (5)")
    parse.add_argument("--profile", choices=("dev", "ci"), default="dev")
    parse.add_argument(
        "--only", nargs="+", action="extend", choices=sorted(ALL), metavar="NAME",
        help="run only these queues (clean or variant names)",
    )  # fmt: skip
    parse.add_argument(
        "--json", type=Path, default=None, help="(.leasecheck/bench-corpus-PROFILE.json)"
    )
    return parse


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    path = args.json or Path(f".leasecheck/bench-corpus-{args.profile}.json")
    names = args.only or list(ALL)
    load = os.getloadavg()[0]
    print(f"profile {args.profile}, {args.runs} runs each, load average {load:.2f} at start")
    results: dict[str, Any] = {}
    for name in names:
        entry = ALL[name]
        runs = []
        for _ in range(args.runs):
            runs.append(run_once(entry, args.profile))
        results[name] = {"queue": entry.queue, "bug": entry.bug, "runs": runs}
        print(summary(name, runs), flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    loads = [r["load"] for q in results.values() for r in q["runs"]]
    meta = {
        "profile": args.profile,
        "runs": args.runs,
        "load_at_start": load,
        "load_after_runs": {"min": min(loads), "max": max(loads)} if loads else None,
    }
    path.write_text(json.dumps({"meta": meta, "queues": results}, indent=1))


if __name__ == "__main__":
    main()
