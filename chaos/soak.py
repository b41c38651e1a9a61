"""The chaos soak: real workers, a seeded nemesis, and a verdict on lost and duplicated work.

    python -m chaos.soak [--mode fenced|naive|heartbeat] [--workers N] [--jobs M]
        [--seed S] [--time-limit SECONDS] [--drain-seconds SECONDS] [--lease SECONDS]
        [--fault-gap SECONDS]
        [--expect clean|duplicates] [--json PATH] [--pg-dsn DSN] [--logs DIR]

It starts a private embedded PostgreSQL (or uses --pg-dsn, where it only creates and
drops a database of its own and never restarts the server), enqueues M jobs of the
reference queue, and starts N `leasecheck.reference.worker` processes. While they work, a nemesis
pauses workers (SIGSTOP/SIGCONT, often for longer than the lease), kills them (SIGKILL;
a replacement starts), cuts their backends (`pg_terminate_backend` on the
application_name each worker gets in its DSN) and restarts the server once. A worker
that dies on its own (it exits on a lost connection) is started again: recovery, not a
fault. After the time limit, or once the queue is empty, the nemesis stops, every worker
is resumed, the queue drains (up to the drain deadline), every process is stopped and the
database is dropped, also on Ctrl-C or an error.

The verdict (JSON on stdout): jobs done, failed (retry cap), still pending, lost (none of
those), duplicate completions (an audit trigger records every commit of a job to done,
so a second commit counts even when the receipt's idempotency key hides it), duplicate
receipts (the receipts table is the external receiver: it drops a repeated idempotency
key, and the naive and heartbeat workers send none, so it accepts every send; of those,
how many involved the slow worker, whose jobs outlast the lease: the rest came from
pauses), and faults injected by kind. Exit 0 when the expectation holds: `clean` (the default for
fenced) means nothing lost, pending or duplicated; `duplicates` (the default for naive
and heartbeat) means at least one duplicate and nothing lost. Either also needs every
fault kind to have landed: a soak that injected nothing proves nothing.

Reproducible from the seed: the fault schedule (times, kinds, target slots, pause
lengths) and every worker process's job duration. Not reproducible: what the operating
system does with them, i.e. which job (if any) a worker holds when a fault lands, how
many jobs finish between faults, how long a restart or a worker's start-up takes; so the
counts of a seed vary from run to run, and only the verdict is expected to repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from chaos import plan as plans
from chaos.database import Database, Outcome
from chaos.nemesis import Nemesis
from chaos.pool import Pool
from leasecheck.dbfixtures import embedded, janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.reference.worker import MODES

EXPECTATIONS = ("clean", "duplicates")
STARTUP_SECONDS = 60.0
CHECK_EVERY = 0.25
PROGRESS_EVERY = 5.0


@dataclass(frozen=True)
class Options:
    """What one soak runs."""

    mode: str = "fenced"
    workers: int = 4
    jobs: int = 500
    seed: int = 0
    time_limit: float = 120.0
    drain_seconds: float = 60.0
    expect: str = "clean"
    pg_dsn: str | None = None
    logs: Path | None = None
    timing: plans.Timing = field(default_factory=plans.Timing)


@dataclass
class Run:
    """What the soak observed while it ran, beside what the database says."""

    faults: Counter[str]
    missed: Counter[str]
    scheduled: Counter[str]
    backends_terminated: int
    exits: Counter[str]
    job_seconds: list[float]
    stopped_by: str
    drained: bool
    lease_lost_warnings: int
    seconds: dict[str, float]
    duplicates_from_slow: int = 0


def soak(opts: Options) -> dict[str, Any]:
    """Run one soak and return its verdict."""
    started = time.monotonic()
    queue = ReferenceQueue()
    with ExitStack() as stack:
        server: embedded.EmbeddedServer | None = None
        if opts.pg_dsn:
            admin = janitor.admin_dsn(opts.pg_dsn)
        else:
            server = embedded.start("leasecheck-soak-")
            stack.callback(server.stop)
            admin = server.dsn
        dsn = stack.enter_context(janitor.temporary(admin, "soak"))
        logs = opts.logs or Path(stack.enter_context(tempfile.TemporaryDirectory("-soak")))
        logs.mkdir(parents=True, exist_ok=True)
        db = Database(dsn)
        stack.callback(db.close)
        db.install(queue)
        ids = db.enqueue(queue, opts.jobs)
        plan = plans.make(opts.seed, opts.workers, opts.timing, opts.time_limit, server is not None)
        pool = Pool(plan, dsn, opts.mode, logs)
        setup = time.monotonic() - started
        _say(f"{opts.jobs} jobs, {opts.workers} {opts.mode} workers, seed {opts.seed}")
        try:
            run = _run(opts, plan, pool, db, server)
        finally:
            pool.stop()
        run.seconds["setup"] = round(setup, 2)
        outcome = db.outcome()
        if plan.slow_slot >= 0:
            run.duplicates_from_slow = db.duplicates_from(f"w{plan.slow_slot}.")
        run.lease_lost_warnings = pool.log_text().count("LeaseLost:")
    run.seconds["wall"] = round(time.monotonic() - started, 2)
    return verdict(opts, len(ids), outcome, run, restart=not opts.pg_dsn)


def _run(
    opts: Options,
    plan: plans.Plan,
    pool: Pool,
    db: Database,
    server: embedded.EmbeddedServer | None,
) -> Run:
    """Start the workers, unleash the nemesis until the time limit or an empty queue, drain."""
    t0 = time.monotonic()
    pool.start()
    pool.wait_ready(STARTUP_SECONDS)
    nemesis = Nemesis(plan, pool, db, server)
    chaos_start = time.monotonic()
    next_check = next_progress = chaos_start
    stopped_by = "time limit"
    while (now := time.monotonic()) - chaos_start < opts.time_limit:
        if now >= next_check:
            pending = db.pending()
            if pending == 0:
                stopped_by = "queue empty"
                break
            next_check = now + CHECK_EVERY
            if now >= next_progress:
                faults = dict(nemesis.injected)
                _say(f"{now - chaos_start:6.1f} s  pending {pending}  faults {faults}")
                next_progress = now + PROGRESS_EVERY
        nemesis.step(now - chaos_start)
        pool.resume_due()
        pool.refill()
        time.sleep(0.02)
    chaos_end = time.monotonic()
    pool.heal()
    _say(f"chaos over ({stopped_by}); healing and draining")
    drained = False
    deadline = chaos_end + opts.drain_seconds
    while time.monotonic() < deadline:
        pool.refill()
        if db.pending() == 0:
            drained = True
            break
        time.sleep(0.1)
    return Run(
        faults=nemesis.injected,
        missed=nemesis.missed,
        scheduled=nemesis.scheduled,
        backends_terminated=nemesis.backends_terminated,
        exits=pool.exits,
        job_seconds=pool.job_seconds,
        stopped_by=stopped_by,
        drained=drained,
        lease_lost_warnings=0,
        seconds={
            "startup": round(chaos_start - t0, 2),
            "chaos": round(chaos_end - chaos_start, 2),
            "drain": round(time.monotonic() - chaos_end, 2),
        },
    )


def verdict(
    opts: Options, enqueued: int, outcome: Outcome, run: Run, restart: bool
) -> dict[str, Any]:
    """Return the soak's figures and whether the expectation held, with the reasons if not."""
    status = outcome.by_status
    done, failed = status.get("done", 0), status.get("failed", 0)
    pending = status.get("queued", 0) + status.get("running", 0)
    lost = enqueued - done - failed - pending
    problems: list[str] = []
    if lost:
        problems.append(f"{lost} jobs lost: neither done, failed nor pending")
    if outcome.done_without_receipt:
        problems.append(f"{outcome.done_without_receipt} jobs done without their receipt")
    duplicates = outcome.duplicate_completions + outcome.duplicate_receipts
    if opts.expect == "clean":
        if pending:
            problems.append(
                f"{pending} jobs still pending after {opts.drain_seconds:g} s of draining: "
                "raise --drain-seconds, or the queue stalls"
            )
        if outcome.duplicate_completions:
            problems.append(f"{outcome.duplicate_completions} jobs completed more than once")
        if outcome.duplicate_receipts:
            problems.append(f"{outcome.duplicate_receipts} jobs with more than one receipt")
    elif duplicates == 0:
        problems.append(
            "no duplicate found: expected some (naive or heartbeat workers, pauses longer "
            "than the lease); run longer or with more jobs"
        )
    kinds = [k for k in plans.KINDS if restart or k != "restart"]
    absent = [k for k in kinds if not run.faults[k]]
    if absent:
        problems.append(
            f"no {', '.join(absent)} fault landed: a soak that injected nothing proves "
            "nothing; run with more jobs or a longer --time-limit"
        )
    return {
        "ok": not problems,
        "problems": problems,
        "mode": opts.mode,
        "expect": opts.expect,
        "seed": opts.seed,
        "workers": opts.workers,
        "jobs_enqueued": enqueued,
        "done": done,
        "failed": failed,
        "pending": pending,
        "lost": lost,
        "done_without_receipt": outcome.done_without_receipt,
        "duplicate_completions": outcome.duplicate_completions,
        "extra_completions": outcome.extra_completions,
        "duplicate_receipts": outcome.duplicate_receipts,
        "extra_receipts": outcome.extra_receipts,
        "duplicate_receipts_with_slow_worker": run.duplicates_from_slow,
        "max_attempt": outcome.max_attempt,
        "faults": {k: run.faults[k] for k in plans.KINDS},
        "faults_missed": {k: run.missed[k] for k in plans.KINDS if run.missed[k]},
        "faults_scheduled": {k: run.scheduled[k] for k in plans.KINDS},
        "backends_terminated": run.backends_terminated,
        "worker_exits": dict(sorted(run.exits.items())),
        "worker_processes": len(run.job_seconds),
        "slow_worker_processes": sum(s > opts.timing.lease for s in run.job_seconds),
        "lease_lost_warnings": run.lease_lost_warnings,
        "stopped_by": run.stopped_by,
        "drained": run.drained,
        "lease_seconds": opts.timing.lease,
        "seconds": run.seconds,
    }


def _say(line: str) -> None:
    print(f"soak: {line}", file=sys.stderr, flush=True)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def parse(argv: list[str] | None) -> tuple[Options, Path | None]:
    """Return the soak the command line asks for, and where to write the verdict."""
    p = argparse.ArgumentParser(
        prog="python -m chaos.soak",
        description="Real reference.worker processes under a seeded nemesis (pauses, kills, "
        "cut backends, one server restart); prints what was lost or duplicated as JSON.",
    )
    p.add_argument("--mode", choices=MODES, default="fenced", help="worker mode (fenced)")
    p.add_argument("--workers", type=_count, default=4, help="worker processes (4)")
    p.add_argument("--jobs", type=_count, default=500, help="jobs enqueued up front (500)")
    p.add_argument("--seed", type=int, default=0, help="seeds the faults and job durations (0)")
    p.add_argument(
        "--time-limit", type=_positive, default=120.0, help="seconds of chaos at most (120)"
    )
    p.add_argument(
        "--drain-seconds", type=_positive, default=60.0, help="seconds to drain after it (60)"
    )
    p.add_argument("--lease", type=_positive, default=1.0, help="lease in seconds (1)")
    p.add_argument(
        "--fault-gap", type=_positive, default=1.0, help="mean seconds between faults (1)"
    )
    p.add_argument(
        "--expect",
        choices=EXPECTATIONS,
        help="what exit status 0 requires: clean (default for fenced) or duplicates "
        "(default for naive and heartbeat)",
    )
    p.add_argument("--json", type=Path, help="also write the verdict to this file")
    p.add_argument(
        "--pg-dsn",
        default=os.environ.get("LEASECHECK_DSN"),
        help="use this server (default: $LEASECHECK_DSN, else a private embedded one); the "
        "soak creates and drops its own database there and does not restart the server",
    )
    p.add_argument("--logs", type=Path, help="keep the worker logs in this directory")
    ns = p.parse_args(argv)
    expect = ns.expect or ("clean" if ns.mode == "fenced" else "duplicates")
    opts = Options(
        mode=ns.mode,
        workers=ns.workers,
        jobs=ns.jobs,
        seed=ns.seed,
        time_limit=ns.time_limit,
        drain_seconds=ns.drain_seconds,
        expect=expect,
        pg_dsn=ns.pg_dsn,
        logs=ns.logs,
        timing=replace(plans.Timing(), lease=ns.lease, gap=ns.fault_gap),
    )
    return opts, ns.json


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into Ctrl-C, once: a second signal must not cut the cleanup short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run the soak; return 0 iff its expectation held (130 if interrupted)."""
    opts, json_path = parse(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        result = soak(opts)
    except KeyboardInterrupt:
        print("soak: interrupted; its workers, database and server are gone", file=sys.stderr)
        return 130
    text = json.dumps(result, indent=2)
    print(text)
    if json_path is not None:
        json_path.write_text(text + "\n")
    for problem in result["problems"]:
        _say(problem)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
