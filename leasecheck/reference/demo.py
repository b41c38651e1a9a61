"""The double-receipt experiment, with real worker processes and real signals.

    python -m leasecheck.reference.demo [--fast] [--pg-dsn DSN] [--json PATH]
        [--scenario slow-job|paused-worker] [--mode naive|heartbeat|fenced] [--serial]

For each scenario and worker mode it starts workers A and B (`python -m
reference.worker`) on a database of its own, holds B with SIGSTOP, enqueues one
receipt job, lets B go once A holds the job, makes A's lease run out, and counts the
receipts the customer got:

- slow-job: A's job takes 1.5 x its lease; B reclaims unless A heartbeats.
- paused-worker: A's job fits in its lease, but A is SIGSTOPped for 1.5 x the lease
  near the end of it; B reclaims and completes; then A gets SIGCONT and completes late.

It prints a table scenario x mode -> receipts next to what the story predicts and exits
0 only if every cell matches. It creates every database it writes to (on the embedded
server unless --pg-dsn names one) and drops it at the end, also on Ctrl-C; it holds no
SQL: everything goes through `ReferenceQueue`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg

from leasecheck.dbfixtures import embedded, janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.reference.worker import MODES, Settings

SCENARIOS = ("slow-job", "paused-worker")
EXPECTED = {
    ("slow-job", "naive"): 2,
    ("slow-job", "heartbeat"): 1,
    ("slow-job", "fenced"): 1,
    ("paused-worker", "naive"): 2,
    ("paused-worker", "heartbeat"): 2,
    ("paused-worker", "fenced"): 1,
}
WHY = {
    ("slow-job", "naive"): "no heartbeat: B reclaims, both send",
    ("slow-job", "heartbeat"): "A's heartbeat keeps its lease",
    ("slow-job", "fenced"): "A's heartbeat keeps its lease",
    ("paused-worker", "naive"): "B reclaims during the pause, both send",
    ("paused-worker", "heartbeat"): "a stopped process cannot heartbeat; A completes unfenced",
    ("paused-worker", "fenced"): "A's late completion is rejected",
}


@dataclass(frozen=True)
class Timing:
    """Every duration of the experiment, in seconds."""

    lease: float
    job: float
    slow_job: float
    pause: float
    stop_at: float
    """Fraction of A's job after which A is stopped (any point inside the job works)."""
    poll: float
    startup: float
    """How long a worker process may take to start and claim before the demo gives up."""


REAL = Timing(lease=30.0, job=20.0, slow_job=45.0, pause=45.0, stop_at=0.8, poll=0.05, startup=60)
# --fast keeps the ratios of the story (job = 2/3 lease, slow job and pause = 1.5 lease)
# but stops A at half its job rather than 80 %, so a demo thread that wakes late on a
# loaded machine still stops A well before A would have finished.
FAST = Timing(lease=2.0, job=4 / 3, slow_job=3.0, pause=3.0, stop_at=0.5, poll=0.05, startup=60)


@dataclass
class Cell:
    """One scenario x mode run and what came of it."""

    scenario: str
    mode: str
    receipts: int | None = None
    attempts: int | None = None
    lease_lost_warnings: int = 0
    seconds: float = 0.0
    problem: str = ""

    @property
    def expected(self) -> int:
        return EXPECTED[(self.scenario, self.mode)]

    @property
    def ok(self) -> bool:
        return not self.problem and self.receipts == self.expected

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "expected": self.expected, "ok": self.ok}


class Aborted(Exception):
    """The demo was interrupted; cells stop waiting and clean up."""


class Children:
    """Every worker process the demo started, so that none outlives it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, settings: Settings, log: Path) -> subprocess.Popen[bytes]:
        """Start a worker process whose output goes to `log`."""
        command = [sys.executable, "-m", "leasecheck.reference.worker", *settings.argv()]
        with self._lock, log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            self._procs.append(proc)
        return proc

    def reap(self, procs: list[subprocess.Popen[bytes]] | None = None) -> None:
        """Kill and wait for `procs` (default: all); SIGKILL works on a stopped process too."""
        with self._lock:
            targets = list(self._procs if procs is None else procs)
        for proc in targets:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


class Experiment:
    """Runs cells against one server; each cell gets a database it creates and drops."""

    def __init__(self, admin_dsn: str, timing: Timing) -> None:
        self.admin = admin_dsn
        self.timing = timing
        self.queue = ReferenceQueue()
        self.children = Children()
        self.abort = threading.Event()
        self.logs: dict[tuple[str, str], str] = {}

    def run(self, scenario: str, mode: str) -> Cell:
        """Play one cell in a fresh database and count the receipts its job produced."""
        cell = Cell(scenario, mode)
        started = time.monotonic()
        name = janitor.database_name("demo")
        dsn = janitor.create(self.admin, name)
        try:
            with (
                psycopg.connect(dsn, autocommit=True) as conn,
                tempfile.TemporaryDirectory(prefix="leasecheck-demo-") as tmp,
            ):
                logs = Path(tmp)
                self.queue.install(conn)
                try:
                    job_id = self._play(conn, cell, logs)
                finally:
                    self.logs[(scenario, mode)] = _merge(
                        *(_read(logs / f"{w}.log") for w in ("A", "B"))
                    )
                cell.receipts = self.queue.receipts(conn, job_id)
                row = self.queue.job(conn, job_id)
                cell.attempts = None if row is None else int(row["attempt"])
        except Aborted:
            cell.problem = "interrupted"
        except RuntimeError as exc:
            cell.problem = str(exc)
        finally:
            janitor.drop(self.admin, name)
        cell.lease_lost_warnings = self.logs.get((scenario, mode), "").count("LeaseLost:")
        cell.seconds = time.monotonic() - started
        return cell

    def _play(self, conn: psycopg.Connection[Any], cell: Cell, logs: Path) -> int:
        """Start A and B, let A claim the job, stage the scenario; return the job id.

        Both workers start before the job exists and B is held with SIGSTOP until A has
        claimed, so that neither Python's start-up time on a loaded machine nor a race
        for the first claim decides the outcome: only leases, heartbeats and fencing do.
        """
        t = self.timing
        slow = cell.scenario == "slow-job"
        a = Settings(
            name="A",
            dsn=conn.info.dsn,
            lease=t.lease,
            job_seconds=t.slow_job if slow else t.job,
            mode=cell.mode,
            max_jobs=1,
            poll=t.poll,
            idle_exit=t.startup + t.lease,
        )
        # Idle exits are a backstop should the demo die; normally the workers stop after
        # one job, or the demo stops B once the job is done without it (see _finish).
        b = replace(a, name="B", job_seconds=t.job, idle_exit=t.startup + t.slow_job + t.pause)
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for settings in (a, b):
                procs[settings.name] = self.children.spawn(settings, logs / f"{settings.name}.log")
            self._wait_ready(logs, procs)
            procs["B"].send_signal(signal.SIGSTOP)
            self._sleep(2 * t.poll)  # a claim B sent just before the stop finds no job
            job_id = self.queue.enqueue(conn, {"receipt_for": f"{cell.scenario}/{cell.mode}"})
            claimed_at = self._wait_claimed(conn, job_id, "A")
            procs["B"].send_signal(signal.SIGCONT)
            if not slow:
                self._pause(conn, job_id, procs["A"], claimed_at, cell)
            self._finish(conn, job_id, procs, cell)
            return job_id
        finally:
            for proc in procs.values():
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGCONT)
            self.children.reap(list(procs.values()))

    def _wait_ready(self, logs: Path, procs: dict[str, subprocess.Popen[bytes]]) -> None:
        """Wait until every worker has connected and logged that it polls for jobs."""
        deadline = time.monotonic() + self.timing.startup
        for name, proc in procs.items():
            while " ready: " not in _read(logs / f"{name}.log"):
                if proc.poll() is not None:
                    raise RuntimeError(f"worker {name} exited with status {proc.returncode}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {name} not ready in {self.timing.startup:.0f} s")
                self._sleep(0.02)

    def _wait_claimed(self, conn: psycopg.Connection[Any], job_id: int, worker: str) -> float:
        """Return the monotonic time at which `worker` claimed the job (an upper bound)."""
        deadline = time.monotonic() + self.timing.startup
        while time.monotonic() < deadline:
            row = self.queue.job(conn, job_id)
            now = time.monotonic()
            if row is not None and row["locked_by"] == worker:
                # The lease ends `lease` after the claim unless a heartbeat moved it on, so
                # this bound is never before the claim, and usually sharper than `now`.
                until: datetime = row["lease_until"]
                since = until.timestamp() - self.timing.lease
                return min(now, now - max(0.0, time.time() - since))
            if row is not None and row["locked_by"] not in (None, worker):
                raise RuntimeError(f"{row['locked_by']} claimed job {job_id} before {worker}")
            self._sleep(0.01)
        raise RuntimeError(
            f"worker {worker} did not claim job {job_id} within {self.timing.startup:.0f} s"
        )

    def _pause(
        self,
        conn: psycopg.Connection[Any],
        job_id: int,
        proc: subprocess.Popen[bytes],
        claimed_at: float,
        cell: Cell,
    ) -> None:
        """SIGSTOP A inside its job, keep it stopped until B has reclaimed, then SIGCONT it."""
        t = self.timing
        self._sleep(claimed_at + t.stop_at * t.job - time.monotonic())
        proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        row = self.queue.job(conn, job_id)
        if row is None or row["status"] != "running" or row["locked_by"] != "A":
            cell.problem = "A finished before the demo could stop it: machine too loaded"
        self._sleep(t.pause)
        # A lease that was renewed just before the stop runs out `lease` after it; should
        # B's claim come late on a loaded machine, keep A stopped (a while) until it has.
        give_up = stopped + t.pause + 2 * t.lease
        while time.monotonic() < give_up:
            row = self.queue.job(conn, job_id)
            if row is None or row["locked_by"] != "A":
                break
            self._sleep(0.05)
        proc.send_signal(signal.SIGCONT)

    def _finish(
        self,
        conn: psycopg.Connection[Any],
        job_id: int,
        procs: dict[str, subprocess.Popen[bytes]],
        cell: Cell,
    ) -> None:
        """Wait for both workers to exit; stop B (SIGTERM) once the job is done without it.

        A job done on attempt 1 can never be claimed again, so B has nothing left to
        do; before that, B keeps watching and reclaims if A's lease runs out.
        """
        t = self.timing
        timeout = t.slow_job + t.pause + 3 * t.lease + 30
        deadline = time.monotonic() + timeout
        a, b = procs["A"], procs["B"]
        told_b = False
        while a.poll() is None or b.poll() is None:
            if time.monotonic() > deadline:
                cell.problem = f"workers still running after {timeout:.0f} s; killed"
                return
            if a.poll() is not None and b.poll() is None and not told_b:
                row = self.queue.job(conn, job_id)
                if row is not None and row["status"] == "done" and row["attempt"] == 1:
                    b.send_signal(signal.SIGTERM)
                    told_b = True
            self._sleep(0.02)
        for name, proc in procs.items():
            if proc.returncode != 0 and not cell.problem:
                cell.problem = f"worker {name} exited with status {proc.returncode}"

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self.abort.wait(seconds):
            raise Aborted
        if self.abort.is_set():
            raise Aborted


def _read(log: Path) -> str:
    try:
        return log.read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return ""


def _merge(*logs: str) -> str:
    """Interleave worker logs by their leading timestamps; other lines stay with theirs."""
    entries: list[tuple[str, int, str]] = []
    for n, text in enumerate(logs):
        for line in text.splitlines():
            if entries and entries[-1][1] == n and not line[:1].isdigit():
                stamp, _, previous = entries[-1]
                entries[-1] = (stamp, n, f"{previous}\n{line}")
            else:
                entries.append((line[:12], n, line))
    entries.sort(key=lambda entry: entry[:2])
    return "\n".join(entry[2] for entry in entries)


def run_cells(experiment: Experiment, cells: list[tuple[str, str]], serial: bool) -> list[Cell]:
    """Run the cells (in parallel unless `serial`), each in its own database.

    Cells run on threads even when serial, so that Ctrl-C lands in the main thread,
    which only waits, and never cuts a cell's own cleanup short.
    """
    pool = ThreadPoolExecutor(max_workers=1 if serial else len(cells), thread_name_prefix="cell")
    try:
        futures = [pool.submit(experiment.run, scenario, mode) for scenario, mode in cells]
        return [future.result() for future in futures]
    finally:
        experiment.abort.set()
        pool.shutdown(wait=True, cancel_futures=True)


def table(cells: list[Cell]) -> str:
    """Return the result as a text table, one row per cell."""
    head = ("scenario", "mode", "receipts", "expected", "attempts", "LeaseLost", "ok", "why")
    rows = [head]
    for c in cells:
        verdict = "yes" if c.ok else f"NO {c.problem}".strip()
        rows.append(
            (
                c.scenario,
                c.mode,
                "-" if c.receipts is None else str(c.receipts),
                str(c.expected),
                "-" if c.attempts is None else str(c.attempts),
                str(c.lease_lost_warnings),
                verdict,
                WHY[(c.scenario, c.mode)],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1]
        for r in rows
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m leasecheck.reference.demo",
        description="Count the receipts one job produces with naive, heartbeat and fenced "
        "workers when a job runs slow or a worker is paused.",
    )
    parser.add_argument("--fast", action="store_true", help="2 s leases: the table in seconds")
    parser.add_argument(
        "--pg-dsn",
        default=os.environ.get("LEASECHECK_DSN"),
        help="run on this server (default: $LEASECHECK_DSN, else an embedded one); the demo "
        "creates and drops its own databases there",
    )
    parser.add_argument("--json", type=Path, help="also write the table as JSON to this file")
    parser.add_argument("--scenario", choices=SCENARIOS, help="run only this scenario")
    parser.add_argument("--mode", choices=MODES, help="run only this worker mode")
    parser.add_argument("--serial", action="store_true", help="one cell at a time")
    parser.add_argument(
        "--verbose", action="store_true", help="print every worker's log after the table"
    )
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into Ctrl-C, once: a second signal must not cut the cleanup short."""
    _interrupt_ignored()
    raise KeyboardInterrupt


def _interrupt_ignored() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def main(argv: list[str] | None = None) -> int:
    """Run the experiment and return 0 iff every cell matches the story."""
    args = parse(argv)
    timing = FAST if args.fast else REAL
    cells = [
        (s, m)
        for s in SCENARIOS
        for m in MODES
        if args.scenario in (None, s) and args.mode in (None, m)
    ]
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    started = time.monotonic()
    server: embedded.EmbeddedServer | None = None
    experiment: Experiment | None = None
    try:
        if args.pg_dsn:
            admin = janitor.admin_dsn(args.pg_dsn)
        else:
            server = embedded.start("leasecheck-demo-")
            admin = server.dsn
        experiment = Experiment(admin, timing)
        results = run_cells(experiment, cells, args.serial)
    except KeyboardInterrupt:
        print("interrupted: killing the workers and dropping the demo databases", file=sys.stderr)
        return 130
    finally:
        _interrupt_ignored()
        if experiment is not None:
            experiment.abort.set()
            experiment.children.reap()
        if server is not None:
            server.stop()
    print(table(results))
    count = f"{len(results)} cell" + ("" if len(results) == 1 else "s")
    print(f"({count}, lease {timing.lease:g} s, {time.monotonic() - started:.1f} s)")
    if args.verbose or not all(c.ok for c in results):
        assert experiment is not None
        for c in results:
            if args.verbose or not c.ok:
                print(f"\n--- workers of {c.scenario} / {c.mode}")
                print(experiment.logs.get((c.scenario, c.mode), "").rstrip())
    if args.json:
        doc = {
            "timing": asdict(timing),
            "cells": [c.as_json() for c in results],
            "ok": all(c.ok for c in results),
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(c.ok for c in results) else 1


if __name__ == "__main__":
    sys.exit(main())
