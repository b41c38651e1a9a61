"""A real worker process for the double-receipt story: claim, work, send a receipt.

    python -m leasecheck.reference.worker NAME --dsn DSN [--lease S] [--job-seconds S]
        [--mode naive|heartbeat|fenced] [--max-jobs N] [--poll S] [--idle-exit S]

It exists so `leasecheck.reference.demo` can show, with real processes and real signals, which
fix stops a duplicate receipt: `naive` only claims and completes, `heartbeat` also
renews its lease from a thread, `fenced` also lets the database reject a completion
whose attempt no longer owns the job and keys its receipt on the job id.

What it must not do: hold SQL (every statement goes through `ReferenceQueue`), fake
time (it sleeps for real, in short slices against a monotonic deadline, so a process
resumed with SIGCONT notices at once that its work is over), or lose a lease quietly
(every lost lease is one WARNING line starting with "LeaseLost:").
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from types import FrameType
from typing import Any

import psycopg

from leasecheck.reference.queue import BadInput, ReferenceQueue, check_worker
from leasecheck.stateful.contract import Claim

MODES = ("naive", "heartbeat", "fenced")
SLICE = 0.05
"""Longest single sleep, so SIGTERM and the end of a SIGCONT'd pause are seen promptly."""

log = logging.getLogger("leasecheck.reference.worker")


@dataclass(frozen=True)
class Settings:
    """How one worker behaves; the demo builds these for its worker processes."""

    name: str
    dsn: str
    lease: float = 30.0
    job_seconds: float = 20.0
    mode: str = "fenced"
    max_jobs: int | None = None
    poll: float = 0.5
    idle_exit: float | None = None

    def argv(self) -> list[str]:
        """Return the command-line arguments that rebuild these settings in a new process."""
        args = [self.name, "--dsn", self.dsn, "--lease", str(self.lease)]
        args += ["--job-seconds", str(self.job_seconds), "--mode", self.mode]
        args += ["--poll", str(self.poll)]
        if self.max_jobs is not None:
            args += ["--max-jobs", str(self.max_jobs)]
        if self.idle_exit is not None:
            args += ["--idle-exit", str(self.idle_exit)]
        return args


class Heartbeat(threading.Thread):
    """Renews one claim's lease every lease/3 on its own connection until stopped.

    A separate connection, because the worker's own connection is busy (or idle in
    the worker's hands) and a heartbeat must not wait for the work. It never stops
    the work itself: it only raises `lost`, and the worker's mode decides what that means.
    """

    def __init__(self, settings: Settings, queue: ReferenceQueue, claim: Claim) -> None:
        super().__init__(name=f"heartbeat-{claim.job_id}", daemon=True)
        self.settings = settings
        self.queue = queue
        self.claim = claim
        self.lost = threading.Event()
        self._done = threading.Event()

    def stop(self) -> None:
        """Stop renewing (before completion: a renewal after it would touch no row)."""
        self._done.set()
        self.join(timeout=self.settings.lease)

    def run(self) -> None:
        lease = timedelta(seconds=self.settings.lease)
        interval = self.settings.lease / 3
        claim = self.claim
        try:
            with psycopg.connect(
                self.settings.dsn, autocommit=True, connect_timeout=max(2, int(interval))
            ) as conn:
                while not self._done.wait(interval):
                    if not self.queue.heartbeat(conn, claim, lease):
                        self._lose(f"renewal touched no row (job {claim.job_id} moved on)")
                        return
        except psycopg.OperationalError as exc:
            if not self._done.is_set():
                self._lose(f"database unreachable ({' '.join(str(exc).split())})")

    def _lose(self, why: str) -> None:
        self.lost.set()
        log.warning(
            "LeaseLost: %s heartbeat for job %s attempt %s failed: %s",
            self.claim.worker,
            self.claim.job_id,
            self.claim.token,
            why,
        )


class Worker:
    """The claim-work-complete loop of one worker process, in one of the three modes."""

    def __init__(self, settings: Settings, queue: ReferenceQueue | None = None) -> None:
        if settings.mode not in MODES:
            raise BadInput(f"unknown mode {settings.mode!r}: use one of {', '.join(MODES)}")
        self.settings = settings
        self.queue = queue or ReferenceQueue()
        self.finished = 0
        self._stop = threading.Event()

    def stop(self) -> None:
        """Ask the loop to end; safe from a signal handler (it only sets an event)."""
        self._stop.set()

    def run(self) -> int:
        """Work until stopped, idle too long, or `max_jobs` jobs finished; return that count.

        A job counts as finished once its completion was attempted, accepted or not,
        so a fenced worker whose completion is rejected also stops at `max_jobs`.
        """
        s = self.settings
        lease = timedelta(seconds=s.lease)
        with psycopg.connect(s.dsn, autocommit=True) as conn:
            log.info(
                "%s ready: mode %s, lease %.3g s, job %.3g s, polling every %.3g s",
                s.name,
                s.mode,
                s.lease,
                s.job_seconds,
                s.poll,
            )
            idle_since = time.monotonic()
            while not self._stop.is_set():
                claim = self.queue.claim(conn, s.name, lease)
                if claim is None:
                    if s.idle_exit is not None and time.monotonic() - idle_since >= s.idle_exit:
                        log.info("%s found no job for %.1f s, exiting", s.name, s.idle_exit)
                        break
                    self._stop.wait(s.poll)
                    continue
                log.info("%s claimed job %s attempt %s", s.name, claim.job_id, claim.token)
                if not self._work(conn, claim):
                    log.info("%s stopped during job %s, leaving it", s.name, claim.job_id)
                    break
                self.finished += 1
                idle_since = time.monotonic()
                if s.max_jobs is not None and self.finished >= s.max_jobs:
                    break
            if self._stop.is_set():
                log.info("%s stopped by a signal (jobs finished: %d)", s.name, self.finished)
        return self.finished

    def _work(self, conn: psycopg.Connection[Any], claim: Claim) -> bool:
        """Do the job, then complete it as the mode says; False if stopped before the end."""
        heartbeat = None
        if self.settings.mode != "naive":
            heartbeat = Heartbeat(self.settings, self.queue, claim)
            heartbeat.start()
        try:
            deadline = time.monotonic() + self.settings.job_seconds
            while (left := deadline - time.monotonic()) > 0:
                if self._stop.wait(min(SLICE, left)):
                    return False
        finally:
            if heartbeat is not None:
                heartbeat.stop()
        self._complete(conn, claim, lost=heartbeat is not None and heartbeat.lost.is_set())
        return True

    def _complete(self, conn: psycopg.Connection[Any], claim: Claim, lost: bool) -> None:
        name, job, attempt = claim.worker, claim.job_id, claim.token
        if self.settings.mode == "fenced":
            key = self.queue.effect_key(claim)
            accepted = self.queue.complete(
                conn, claim, lambda c: self.queue.send_receipt(c, claim, key)
            )
            if not accepted:
                log.warning(
                    "LeaseLost: completion of job %s attempt %s rejected "
                    "(another worker owns it); %s sent no receipt",
                    job,
                    attempt,
                    name,
                )
                return
        else:
            if lost:
                log.warning(
                    "LeaseLost: %s lost job %s attempt %s but completes it anyway (unfenced)",
                    name,
                    job,
                    attempt,
                )
            self.queue.complete_unfenced(
                conn, claim, lambda c: self.queue.send_receipt(c, claim, None)
            )
        log.info("%s completed job %s attempt %s and sent a receipt", name, job, attempt)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be zero or more seconds, got {text}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def parse(argv: list[str] | None = None) -> Settings:
    """Return the settings the command line asks for."""
    parser = argparse.ArgumentParser(
        prog="python -m leasecheck.reference.worker",
        description="Claim jobs from the reference queue, work on each, send a receipt.",
    )
    parser.add_argument("name", help="this worker's name, recorded as locked_by and on receipts")
    parser.add_argument("--dsn", required=True, help="PostgreSQL DSN of the queue's database")
    parser.add_argument("--lease", type=_positive, default=30.0, help="lease in seconds (30)")
    parser.add_argument(
        "--job-seconds", type=_non_negative, default=20.0, help="how long each job takes (20)"
    )
    parser.add_argument("--mode", choices=MODES, default="fenced", help="which fixes to use")
    parser.add_argument("--max-jobs", type=_count, help="exit after this many finished jobs")
    parser.add_argument("--poll", type=_positive, default=0.5, help="seconds between claims (0.5)")
    parser.add_argument(
        "--idle-exit", type=_non_negative, help="exit after this many seconds without a job"
    )
    ns = parser.parse_args(argv)
    try:
        name = check_worker(ns.name)
    except BadInput as exc:
        parser.error(str(exc))
    return Settings(
        name=name,
        dsn=ns.dsn,
        lease=ns.lease,
        job_seconds=ns.job_seconds,
        mode=ns.mode,
        max_jobs=ns.max_jobs,
        poll=ns.poll,
        idle_exit=ns.idle_exit,
    )


def main(argv: list[str] | None = None) -> int:
    """Run one worker until it is done; SIGTERM and SIGINT end it cleanly with status 0."""
    settings = parse(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s.%(msecs)03d %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    worker = Worker(settings)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        worker.run()
    except psycopg.OperationalError as exc:
        log.error("%s lost its database connection: %s", settings.name, " ".join(str(exc).split()))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
