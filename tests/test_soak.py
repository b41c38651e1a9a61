"""The chaos soak, run for real: worker processes, signals, cut backends, a server restart.

Each soak starts its own private embedded server, because it restarts it: restarting the
suite's shared server would break the tests running beside it under xdist. The fenced and
the naive soak run at the same time (their workers mostly sleep), so the pair costs about
one soak's time. The plan tests below check the seeded schedule without any process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chaos import plan

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("pause", "kill", "cut", "restart")
JOBS = 300
WORKERS = 4


@dataclass(frozen=True)
class SoakRun:
    """What one `python -m chaos.soak` run returned, printed and wrote."""

    returncode: int
    output: str
    verdict: dict[str, Any]


def _run_soaks(tmp: Path) -> dict[str, SoakRun]:
    """Run a fenced and a naive soak side by side and keep what each produced."""
    procs: dict[str, tuple[subprocess.Popen[str], Path]] = {}
    # Without LEASECHECK_DSN each soak starts (and restarts) a private embedded server.
    env = {k: v for k, v in os.environ.items() if k != "LEASECHECK_DSN"}
    try:
        for mode, expect in (("fenced", "clean"), ("naive", "duplicates")):
            path = tmp / f"{mode}.json"
            command = [sys.executable, "-m", "chaos.soak", "--mode", mode, "--expect", expect]
            command += ["--jobs", str(JOBS), "--workers", str(WORKERS), "--seed", "7"]
            command += ["--time-limit", "90", "--json", str(path)]
            proc = subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            procs[mode] = (proc, path)
        runs = {}
        for mode, (proc, path) in procs.items():
            output, _ = proc.communicate(timeout=300)
            verdict = json.loads(path.read_text()) if path.exists() else {}
            runs[mode] = SoakRun(proc.returncode, output, verdict)
        return runs
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=60)


@pytest.mark.slow
def test_fenced_soak_is_clean_where_the_naive_soak_duplicates(tmp_path: Path) -> None:
    """Under pauses, kills, cut backends and a server restart, fenced workers finish every
    job exactly once, while the same soak with naive workers sends duplicate receipts.

    One test rather than several on a shared fixture: under xdist each process running
    one of them would run both soaks again.
    """
    runs = _run_soaks(tmp_path)
    for mode, run in runs.items():
        faults = run.verdict.get("faults", {})
        missing = [kind for kind in KINDS if not faults.get(kind)]
        assert missing == [], f"{mode} soak injected no {missing}: it proves nothing\n{run.output}"
        assert faults["restart"] == 1, run.output
        assert run.verdict["lost"] == 0, run.output

    fenced = runs["fenced"]
    assert fenced.returncode == 0, fenced.output
    v = fenced.verdict
    assert v["done"] + v["failed"] == JOBS, fenced.output
    assert (v["pending"], v["done_without_receipt"]) == (0, 0), fenced.output
    assert (v["duplicate_completions"], v["duplicate_receipts"]) == (0, 0), fenced.output

    naive = runs["naive"]
    assert naive.returncode == 0, naive.output
    assert naive.verdict["duplicate_receipts"] > 0, naive.output
    assert naive.verdict["duplicate_completions"] > 0, naive.output


def test_plan_is_a_function_of_the_seed() -> None:
    """The same seed gives the same faults and job durations; another seed does not."""
    timing = plan.Timing()
    a, b = (plan.make(11, 4, timing, 30.0, restart=True) for _ in range(2))
    other = plan.make(12, 4, timing, 30.0, restart=True)
    assert a == b
    assert [a.job_seconds(s, g) for s in range(4) for g in range(3)] == [
        b.job_seconds(s, g) for s in range(4) for g in range(3)
    ]
    assert a.faults != other.faults


@pytest.mark.parametrize("seed", range(20))
def test_plan_restarts_once_after_a_first_round_of_every_kind(seed: int) -> None:
    """The first round is a long pause, a kill and a cut, then the one and only restart."""
    faults = plan.make(seed, 3, plan.Timing(), 10.0, restart=True).faults
    assert sorted(f.kind for f in faults[:4]) == sorted(KINDS)
    assert (faults[0].kind, faults[3].kind) == ("pause", "restart")
    assert Counter(f.kind for f in faults)["restart"] == 1
    assert faults[0].seconds > plan.Timing().lease


def test_plan_never_restarts_a_server_it_does_not_own() -> None:
    """With restart=False (a --pg-dsn server) no restart is scheduled."""
    faults = plan.make(3, 2, plan.Timing(), 20.0, restart=False).faults
    assert "restart" not in {f.kind for f in faults}


def test_one_slot_is_slow_in_every_generation() -> None:
    """The seed's slow slot outlasts the lease in every generation; the others stay short."""
    timing = plan.Timing()
    p = plan.make(5, 4, timing, 10.0, restart=True)
    for slot in range(4):
        for generation in range(5):
            seconds = p.job_seconds(slot, generation)
            if slot == p.slow_slot:
                assert seconds > timing.lease
            else:
                assert timing.job_min <= seconds <= timing.job_max
