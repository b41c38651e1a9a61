"""Benchmark (not a test): what resetting between examples costs, and what it leaves behind.

    python -m bench.reset_cost [--cycles 1000] [--warmup 20] [--jobs 5-20] [--connections 8]
                               [--vacuum-every 100] [--method NAME ...] [--seed 0]
                               [--pg-dsn DSN] [--json PATH]

The suite empties the queue between examples (`Harness.reset()`: the reference's
`leasecheck.tables.empty`, DELETE then a VACUUM that hands the emptied files back, and
a DELETE of the harness's effects). Each method below gets a database
of its own, cloned from one template with the reference schema, and runs the same
cycles, round robin so that load on the machine hits every method alike: the next
example's first enqueue and claim (timed: the claim scans the partial index
`jobs_claimable`, which DELETE fills with dead entries until vacuum comes), a
realistic leftover of one example (jobs queued, running, done and failed, receipts,
effect rows, the clock moved on), then the reset (timed). It prints median and p90
per reset and per claim, and ratios to a plain DELETE, all from the same run.
`delete-vacuum` is the DELETE plus a VACUUM of the two tables every `--vacuum-every`
resets (its cost spread over those resets), in case dead entries slow the claim.

The rollback methods are measured on one connection, as a lower bound: the machine
cannot use them (see ROLLBACK_CAVEAT). The savepoint method's transaction stays open
all run and would slow its neighbours, so it runs afterwards beside a fresh DELETE,
and its ratios are to that one. It only creates and drops databases of its
own, marked as janitor marks them, and drops them all at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection, sql

from bench.time_to_detect import _p90
from leasecheck.dbfixtures import embedded, janitor
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock
from leasecheck.stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("reset_cost.sql"))
QUEUE = ReferenceQueue()
LEASE = timedelta(seconds=30)
ROLLBACK_CAVEAT = (
    "rollback/savepoint are a lower bound the machine cannot use: its workers run on "
    "several connections at once and commit their own claims and completions, which a "
    "transaction (or savepoint) wrapping the example on one connection neither sees nor "
    "undoes"
)


class _Databases:
    """The databases this run creates: clones of one marked template, all dropped at the end."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.names: list[str] = []
        self.template = self._new_name("tpl")

    def create_template(self) -> None:
        """Create the template: the harness schema and the reference queue's."""
        self.names.append(self.template)
        dsn = janitor.create(self.admin, self.template)
        with clock.connect(dsn) as conn:
            clock.install(conn)
            QUEUE.install(conn)

    def _new_name(self, label: str) -> str:
        return janitor.database_name(f"bench_reset_{label}")

    def clone(self, strategy: str = "wal_log") -> tuple[str, str]:
        """Return the name and a DSN of a new marked copy of the template."""
        name = self._new_name("db")
        self.names.append(name)
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL(QUERIES["clone"].text).format(
                    sql.Identifier(name), sql.Identifier(self.template), sql.Literal(strategy)
                )
            )
            conn.execute(
                sql.SQL(QUERIES["mark"].text).format(
                    sql.Identifier(name), sql.Literal(janitor.MARK)
                )
            )
        return name, janitor.with_database(self.admin, name)

    def drop(self, name: str) -> None:
        janitor.drop(self.admin, name)
        self.names.remove(name)

    def drop_all(self) -> None:
        for name in reversed(list(self.names)):
            self.drop(name)


class _Method:
    """One way to reset, on a database of its own; `conn` is the connection examples use."""

    name = ""
    isolated = False
    """Runs in a phase of its own, beside a fresh DELETE, because it slows the others."""

    def __init__(self, dbs: _Databases) -> None:
        self.dbs = dbs
        self.db, dsn = dbs.clone()
        self.conn: Connection[Any] = clock.connect(dsn)

    def begin_example(self) -> None:
        """Prepare for the next example (only the rollback methods need to)."""

    def reset(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.conn.close()


class _Delete(_Method):
    name = "delete"

    def reset(self) -> None:
        self.conn.execute(QUERIES["delete"].text)


class _Empty(_Method):
    """The reference's reset: `leasecheck.tables.empty` (DELETE, setval, VACUUM, checked)."""

    name = "tables.empty (current)"

    def reset(self) -> None:
        QUEUE.reset(self.conn)
        clock.reset(self.conn)


class _DeleteVacuum(_Delete):
    """DELETE, and every `every`-th reset a VACUUM, so the claim's index stays short."""

    name = "delete + vacuum"
    every = 100

    def __init__(self, dbs: _Databases) -> None:
        super().__init__(dbs)
        self.resets = 0

    def reset(self) -> None:
        super().reset()
        self.resets += 1
        if self.resets % self.every == 0:
            self.conn.execute(QUERIES["vacuum"].text)


class _Truncate(_Method):
    name = "truncate"
    query = "truncate"

    def reset(self) -> None:
        self.conn.execute(QUERIES[self.query].text)


class _TruncateRestart(_Truncate):
    name = "truncate restart identity"
    query = "truncate_restart"


class _Template(_Method):
    """A new database from the template; the pool's connections all have to be reopened."""

    name = "template (wal_log)"
    strategy = "wal_log"
    connections = 8

    def __init__(self, dbs: _Databases) -> None:
        self.dbs = dbs
        self.db, dsn = dbs.clone(self.strategy)
        self.pool = [clock.connect(dsn) for _ in range(self.connections)]
        self.conn = self.pool[0]

    def reset(self) -> None:
        old, old_pool = self.db, self.pool
        self.db, dsn = self.dbs.clone(self.strategy)
        self.pool = [clock.connect(dsn) for _ in range(self.connections)]
        self.conn = self.pool[0]
        for conn in old_pool:
            conn.close()
        self.dbs.drop(old)

    def close(self) -> None:
        for conn in self.pool:
            conn.close()


class _TemplateFileCopy(_Template):
    name = "template (file_copy)"
    strategy = "file_copy"


class _Rollback(_Method):
    name = "rollback"

    def begin_example(self) -> None:
        self.conn.execute("begin")

    def reset(self) -> None:
        self.conn.execute("rollback")


class _Savepoint(_Method):
    """One transaction held for the whole run, a savepoint per example.

    That transaction holds back the pruning of dead rows in every database of the
    server (the snapshot xmin is cluster-wide), so DELETE's dead index entries
    pile up next door and its claims slow down: it runs in a phase of its own.
    """

    name = "savepoint"
    isolated = True

    def __init__(self, dbs: _Databases) -> None:
        super().__init__(dbs)
        self.conn.execute("begin")

    def begin_example(self) -> None:
        self.conn.execute("savepoint example")

    def reset(self) -> None:
        self.conn.execute("rollback to savepoint example; release savepoint example")

    def close(self) -> None:
        self.conn.execute("rollback")
        super().close()


METHODS: dict[str, type[_Method]] = {
    "delete": _Delete,
    "empty": _Empty,
    "delete-vacuum": _DeleteVacuum,
    "truncate": _Truncate,
    "truncate-restart": _TruncateRestart,
    "template": _Template,
    "template-file-copy": _TemplateFileCopy,
    "rollback": _Rollback,
    "savepoint": _Savepoint,
}


def _leftover(conn: Connection[Any], rng: random.Random, jobs: tuple[int, int]) -> None:
    """Leave what one example leaves: jobs in every state, receipts, effect rows, a moved clock."""
    n = rng.randint(*jobs)
    for i in range(n):
        QUEUE.enqueue(conn, {"n": i + 2, "kind": "receipt"})
    record = clock.QUERIES["record_effect"].text
    for call in range(1, rng.randint(1, n) + 1):
        claim = QUEUE.claim(conn, f"w{call % 5}", LEASE)
        if claim is None:
            break
        fate = rng.choice(("running", "done", "done", "failed"))
        if fate == "done":
            params = {"call_id": call, "job": str(claim.job_id), "token": "1", "worker": "w"}

            def effect(c: Connection[Any], params: dict[str, Any] = params) -> None:
                c.execute(record, params)

            QUEUE.complete(conn, claim, effect)
            QUEUE.send_receipt(conn, claim, QUEUE.effect_key(claim))
        elif fate == "failed":
            QUEUE.fail(conn, claim, "job raised")
    clock.advance(conn, timedelta(seconds=rng.randint(1, 120)))


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1000


@contextmanager
def _server(pg_dsn: str | None) -> Iterator[str]:
    """Yield an admin DSN: the user's server, or a throwaway embedded one."""
    if pg_dsn:
        yield janitor.admin_dsn(pg_dsn)
        return
    server = embedded.start()
    try:
        yield server.dsn
    finally:
        server.stop()


def _jobs(text: str) -> tuple[int, int]:
    try:
        low, _, high = text.partition("-")
        bounds = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: write MIN-MAX, e.g. 5-20") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"--jobs {text!r}: need 1 <= MIN <= MAX, e.g. 5-20")
    return bounds


def _cycles(
    methods: list[_Method], cycles: int, jobs: tuple[int, int], seed: int
) -> dict[str, dict[str, list[float]]]:
    """Run every method's cycles round robin; return its reset and claim times (µs)."""
    rngs = {m.name: random.Random(seed) for m in methods}
    times: dict[str, dict[str, list[float]]] = {m.name: {"reset": [], "claim": []} for m in methods}
    for cycle in range(cycles):
        shift = cycle % len(methods)
        for m in methods[shift:] + methods[:shift]:
            m.begin_example()
            QUEUE.enqueue(m.conn, {"n": 1, "kind": "receipt"})
            times[m.name]["claim"].append(_timed(partial(QUEUE.claim, m.conn, "w0", LEASE)))
            _leftover(m.conn, rngs[m.name], jobs)
            times[m.name]["reset"].append(_timed(m.reset))
    return times


def _table_state(conn: Connection[Any]) -> dict[str, int]:
    """Dead tuples (as the statistics last saw them), vacuums, and the claim index's size."""
    if conn.info.server_version >= 150000:  # before 15, statistics arrive within 0.5 s anyway
        conn.execute("select pg_stat_force_next_flush()")
    row = conn.execute(QUERIES["dead_tuples"].text).fetchone()
    assert row is not None
    return {"dead": row[0], "live": row[1], "vacuums": row[2], "index_bytes": row[3]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000, help="examples per method")
    parser.add_argument("--warmup", type=int, default=20, help="first cycles left out of stats")
    parser.add_argument("--jobs", type=_jobs, default=(5, 20), help="jobs per leftover, MIN-MAX")
    parser.add_argument(
        "--connections",
        type=int,
        default=8,
        help="connections the template method reopens per reset (the pool: monitor + "
        "main and heartbeat of 2-5 workers)",
    )
    parser.add_argument(
        "--vacuum-every", type=int, default=100, help="resets between VACUUMs (delete-vacuum)"
    )
    parser.add_argument("--method", action="append", choices=sorted(METHODS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--json", type=Path, default=Path(".leasecheck/bench-reset-cost.json"))
    args = parser.parse_args()
    if args.cycles <= args.warmup:
        parser.error(f"--cycles {args.cycles} must exceed --warmup {args.warmup}")
    if args.vacuum_every < 1:
        parser.error("--vacuum-every must be at least 1")
    _Template.connections = args.connections
    _DeleteVacuum.every = args.vacuum_every
    chosen = args.method or list(METHODS)
    if "delete" not in chosen:
        chosen.insert(0, "delete")  # every ratio is to the current choice
    phases = [[n for n in chosen if not METHODS[n].isolated]]
    phases += [["delete", n] for n in chosen if METHODS[n].isolated]
    times: dict[str, dict[str, list[float]]] = {}
    states: dict[str, dict[str, int]] = {}
    baseline: dict[str, str] = {}
    with _server(args.pg_dsn) as admin:
        with psycopg.connect(admin) as conn:
            settings: dict[str, str] = dict(conn.execute(QUERIES["autovacuum"].text).fetchall())
        dbs = _Databases(admin)
        try:
            dbs.create_template()
            for phase in phases:
                _phase(dbs, phase, args, times, states, baseline)
        finally:
            dbs.drop_all()
    result = _report(times, states, baseline, args)
    result["autovacuum"] = settings
    print("autovacuum: " + ", ".join(f"{k}={v}" for k, v in settings.items()))
    print(ROLLBACK_CAVEAT)
    if len(phases) > 1:
        print(
            "savepoint ran in a phase of its own beside a fresh delete: its transaction, open "
            "all run, holds back pruning of dead rows in every database of the server"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**result, "raw": times}, indent=1))


def _phase(
    dbs: _Databases,
    names: list[str],
    args: argparse.Namespace,
    times: dict[str, dict[str, list[float]]],
    states: dict[str, dict[str, int]],
    baseline: dict[str, str],
) -> None:
    """Run `names` round robin on fresh databases; add their figures to the dicts."""
    methods: list[_Method] = []
    try:
        for name in names:
            methods.append(METHODS[name](dbs))
        if len(names) == 2 and METHODS[names[1]].isolated:
            methods[0].name = f"delete (beside {methods[1].name})"
        for m in methods:
            baseline[m.name] = methods[0].name
        times.update(_cycles(methods, args.cycles, args.jobs, args.seed))
        states.update({m.name: _table_state(m.conn) for m in methods})
    finally:
        for m in methods:
            m.close()
            dbs.drop(m.db)


def _report(
    times: dict[str, dict[str, list[float]]],
    states: dict[str, dict[str, int]],
    baseline: dict[str, str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Print the two tables and return their figures."""
    w = args.warmup
    tail = max(1, (args.cycles - w) // 10)
    summary: dict[str, dict[str, float]] = {}
    for name, t in times.items():
        reset, claim = t["reset"][w:], t["claim"][w:]
        # A reset's cost to the suite is the reset plus what it does to the next claim.
        cycle = [r + c for r, c in zip(t["reset"][w:-1], t["claim"][w + 1 :], strict=True)]
        summary[name] = {
            "reset_median_us": statistics.median(reset),
            "reset_p90_us": _p90(reset),
            "reset_mean_us": statistics.fmean(reset),
            "claim_first_median_us": statistics.median(claim[:tail]),
            "claim_last_median_us": statistics.median(claim[-tail:]),
            "claim_p90_us": _p90(claim),
            "reset_plus_next_claim_median_us": statistics.median(cycle),
            "reset_plus_next_claim_mean_us": statistics.fmean(cycle),
            **states[name],
        }
    print(
        f"reset between examples, {args.cycles - w} cycles after {w} warm-up, "
        f"{args.jobs[0]}-{args.jobs[1]} jobs left over each (µs)"
    )
    print(f"{'method':<26} {'median':>9} {'p90':>9} {'mean':>9} {'x delete':>9}")
    for name, s in summary.items():
        base = summary[baseline[name]]
        s["reset_ratio"] = s["reset_median_us"] / base["reset_median_us"]
        print(
            f"{name:<26} {s['reset_median_us']:>9.0f} {s['reset_p90_us']:>9.0f} "
            f"{s['reset_mean_us']:>9.0f} {s['reset_ratio']:>9.2f}"
        )
    print(
        f"\nthe next example's first claim (µs; first and last {tail} cycles), "
        "reset + next claim (median, mean: a periodic VACUUM shows in the mean only), "
        "and the jobs table at the end"
    )
    print(
        f"{'method':<26} {'first':>7} {'last':>7} {'p90':>7} {'r+c med':>8} {'r+c mean':>9} "
        f"{'x delete':>9} {'dead':>7} {'vacuums':>8} {'index kB':>9}"
    )
    for name, s in summary.items():
        base = summary[baseline[name]]
        s["reset_plus_next_claim_ratio"] = (
            s["reset_plus_next_claim_mean_us"] / base["reset_plus_next_claim_mean_us"]
        )
        print(
            f"{name:<26} {s['claim_first_median_us']:>7.0f} {s['claim_last_median_us']:>7.0f} "
            f"{s['claim_p90_us']:>7.0f} {s['reset_plus_next_claim_median_us']:>8.0f} "
            f"{s['reset_plus_next_claim_mean_us']:>9.0f} {s['reset_plus_next_claim_ratio']:>9.2f} "
            f"{s['dead']:>7} {s['vacuums']:>8} {s['index_bytes'] / 1024:>9.0f}"
        )
    return {
        "cycles": args.cycles,
        "warmup": w,
        "jobs": list(args.jobs),
        "connections": args.connections,
        "vacuum_every": args.vacuum_every,
        "seed": args.seed,
        "methods": summary,
    }


if __name__ == "__main__":
    main()
