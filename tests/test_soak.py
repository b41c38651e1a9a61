"""The chaos soak, run for real: worker processes, signals, cut backends, a server restart.

Each soak starts its own private embedded server, because it restarts it: restarting the
suite's shared server would break the tests running beside it under xdist. The fenced and
the naive soak run at the same time (they mostly sleep), so the pair costs one soak's time.
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

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class SoakRun:
    """What one `python -m chaos.soak` run returned, printed and wrote."""

    returncode: int
    output: str
    verdict: dict[str, Any]


@pytest.fixture(scope="module")
def soaks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SoakRun]:
    """Run a fenced and a naive soak side by side and keep what each produced."""
    tmp = tmp_path_factory.mktemp("soak")
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


def test_fenced_soak_loses_and_duplicates_nothing(soaks: dict[str, SoakRun]) -> None:
    """Under pauses, kills, cut backends and a restart, fenced workers finish every job once."""
    run = soaks["fenced"]
    assert run.returncode == 0, run.output
    v = run.verdict
    assert v["done"] + v["failed"] == JOBS, run.output
    assert (v["lost"], v["pending"], v["done_without_receipt"]) == (0, 0, 0), run.output
    assert (v["duplicate_completions"], v["duplicate_receipts"]) == (0, 0), run.output


@pytest.mark.parametrize("mode", ["fenced", "naive"])
def test_soak_injects_every_fault_kind(soaks: dict[str, SoakRun], mode: str) -> None:
    """Each soak landed at least one pause, kill, cut and restart: otherwise it proves nothing."""
    faults = soaks[mode].verdict.get("faults", {})
    assert [kind for kind in KINDS if not faults.get(kind)] == [], soaks[mode].output
    assert faults["restart"] == 1


def test_naive_soak_sends_duplicate_receipts(soaks: dict[str, SoakRun]) -> None:
    """The same soak with naive workers gets a job completed, and its receipt sent, twice."""
    run = soaks["naive"]
    assert run.returncode == 0, run.output
    v = run.verdict
    assert v["duplicate_receipts"] > 0, run.output
    assert v["duplicate_completions"] > 0, run.output
    assert v["lost"] == 0, run.output


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
    """Every kind comes in the first round, restart last, and the server restarts exactly once."""
    faults = plan.make(seed, 3, plan.Timing(), 10.0, restart=True).faults
    assert sorted(f.kind for f in faults[:4]) == sorted(KINDS)
    assert faults[3].kind == "restart"
    assert Counter(f.kind for f in faults)["restart"] == 1
    first_pause = next(f for f in faults if f.kind == "pause")
    assert first_pause.seconds > plan.Timing().lease


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
