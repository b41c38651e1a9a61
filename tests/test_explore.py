"""The bounded-exhaustive explorer: a small scope searched whole, or a counterexample."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Hashable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg import Connection

import mutants
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.contract import Claim
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.driver import Driver
from leasecheck.stateful.exhaustive import moves, search, state
from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import EXCLUSIVE_LEASE, SINGLE_COMPLETION, PropertyViolated


def test_the_reference_has_no_violation_in_a_small_scope(reference_pool: actors.Pool) -> None:
    scope = Scope(workers=2, jobs=1, moves=1, preemptions=1)
    done = search.explore(Harness(queue=ReferenceQueue(), pool=reference_pool), scope)
    assert done.violation is None and done.complete
    assert done.schedules >= 10 and 0 < done.states <= done.schedules
    said = done.said(scope)
    assert said.startswith("no violation in scope (2 workers, 1 job, 1 move, 1 preemption)")


def test_the_story_is_found_in_two_moves(reference_pool: actors.Pool) -> None:
    """claim, then asleep (another reclaims, the sleeper completes): the naive queue breaks."""
    queue = contract.load(mutants.ALL["naive"])
    scope = Scope(workers=2, jobs=1, moves=2, preemptions=0)
    done = search.explore(Harness(queue=queue, pool=reference_pool), scope)
    assert done.violation is not None
    assert done.violation.violation.prop == SINGLE_COMPLETION
    assert [s.rule for s in done.counterexample] == ["start", "claim", "asleep"]


def _stale_report(rule: str) -> list[Step]:
    """w0 sleeps past its lease, w1 takes job1 over, then w0 reports on its old claim."""
    return [
        Step("start", {"workers": 2}),
        Step("claim", {"how": Take(worker=0, held=False)}),
        Step("asleep", {"how": Stall(worker=0, alone=True, then="nothing")}),
        Step("claim", {"how": Take(worker=0, held=False)}),
        Step(rule, {"pick": 0}),
    ]


def test_rows_the_queue_does_not_show_keep_two_states_apart(reference_pool: actors.Pool) -> None:
    """stale-release's stale failure report ends the owner's lease in the row alone:
    what state() shows reads as after a refused completion. Merged with it, the claim that
    breaks exclusive-lease would never be tried, and the scope would read "no violation"."""
    harness = Harness(queue=contract.load(mutants.ALL["stale-release"]), pool=reference_pool)
    scope = Scope(workers=2, jobs=1, moves=4, preemptions=0)
    tables = state.Tables(reference_pool.monitor)
    states: dict[str, Any] = {}
    for rule in ("fail", "complete"):
        harness.reset()
        d = Driver(harness)
        for step in _stale_report(rule):
            getattr(d, step.rule)(**step.args)
            d.check()
        states[rule] = state.fingerprint(d, tables)
        d.teardown()
    (_, fail_shown, fail_rows), (_, complete_shown, complete_rows) = states.values()
    assert fail_shown == complete_shown, "state() tells them apart by itself"
    assert fail_rows != complete_rows
    then = Step("claim", {"how": Take(worker=0, held=False)})
    with pytest.raises(PropertyViolated) as caught:
        search.run_program(harness, [*_stale_report("fail"), then], scope)
    assert caught.value.violation.prop == EXCLUSIVE_LEASE


def test_a_search_cut_short_says_it_proves_nothing(reference_pool: actors.Pool) -> None:
    scope = Scope(moves=3)
    done = search.explore(Harness(queue=ReferenceQueue(), pool=reference_pool), scope, 0.0)
    assert not done.complete
    assert "which proves nothing about the rest" in done.said(scope)


def test_the_command_saves_the_counterexample_and_exits_1(tmp_path: Path) -> None:
    """`leasecheck explore` as a user runs it: its own server, a failure file, exit 1."""
    done = subprocess.run(
        [
            sys.executable, "-m", "leasecheck.cli", "explore", "mutants.naive:Naive",
            "--moves", "2", "--preemptions", "0", "--leasecheck-dir", str(tmp_path),
        ],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[single-completion]" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("leasecheck explore: violation in scope (2 workers, 1 job")
    assert len(list(tmp_path.glob("naive-single-completion-*.json"))) == 1


def test_a_restart_under_the_old_name_is_found_in_three_moves(reference_pool: actors.Pool) -> None:
    """claim, restart (the new process has the old name), claim: recover-by-name hands the
    old process's job out again within its lease. Among the calls, crashes and restarts
    (with every move, stalls and faults among them, the same search takes 25 times as
    long: the opening's third small scope meets it on every run as well)."""
    queue = contract.load(mutants.ALL["recover-by-name"])
    rules = frozenset({"claim", "complete", "fail", "heartbeat", "crash", "restart"})
    scope = Scope(workers=2, jobs=1, moves=3, preemptions=0, rules=rules)
    done = search.explore(Harness(queue=queue, pool=reference_pool), scope)
    assert done.violation is not None
    assert done.violation.violation.prop == EXCLUSIVE_LEASE
    assert [s.rule for s in done.counterexample] == ["start", "claim", "restart", "claim"]


def test_drawn_isolation_offers_every_level(reference_pool: actors.Pool) -> None:
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool, isolation="drawn")
    harness.reset()
    d = Driver(harness)
    try:
        d.start(2)
        levels = {s.args.get("level") for s in moves.enabled(d, Scope(), 0)}
    finally:
        d.teardown()
    assert levels == {None, "read committed", "repeatable read", "serializable"}


STAMP = (
    "update jobs set payload = payload || jsonb_build_object('claim', gen_random_uuid()) "
    "where id = %s"
)


class RandomStamp(ReferenceQueue):
    """The reference, stamping each claimed row with a random claim id (as libraries
    that lock by a random id do): the same program leaves different rows every run."""

    name = "random-stamp"

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        claim = super().claim(conn, worker, lease)
        if claim is not None:
            conn.execute(STAMP, [claim.job_id])
        return claim


def _twice(harness: Harness, *tables: state.Tables) -> list[list[Hashable]]:
    """Run one program (claim, time passes) twice; return its states under each `tables`."""
    program = [
        *Scope().start(),
        Step("claim", {"how": Take(worker=0, held=False)}),
        Step("time_passes", {"to": "past-lease-end"}),
    ]
    runs = []
    for _ in range(2):
        harness.reset()
        d = Driver(harness)
        for step in program:
            getattr(d, step.rule)(**step.args)
        runs.append([state.fingerprint(d, t) for t in tables])
        d.teardown()
    return runs


def test_one_program_run_twice_is_one_state(reference_pool: actors.Pool) -> None:
    """The harness's clock keeps the real instant of each move: in the state, it kept every
    state apart, and 3 moves with 1 preemption took 26,686 schedules instead of 5,051."""
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    (first,), (second,) = _twice(harness, state.Tables(reference_pool.monitor))
    assert first == second


def test_a_column_left_out_lets_states_of_random_ids_merge(reference_pool: actors.Pool) -> None:
    """Each claim's random stamp keeps two runs of one program apart (for a library with
    uuidv7 ids, 3,122 schedules were 3,122 states); with its column left out
    (`--ignore-column jobs.payload`) they are one state."""
    harness = Harness(queue=RandomStamp(), pool=reference_pool)
    monitor = reference_pool.monitor
    tables = state.Tables(monitor), state.Tables(monitor, ["jobs.payload"])
    (kept_1, merged_1), (kept_2, merged_2) = _twice(harness, *tables)
    assert kept_1 != kept_2, "the stamp is not random, so this test shows nothing"
    assert merged_1 == merged_2


def test_a_transaction_held_from_another_instant_is_another_state(
    reference_pool: actors.Pool,
) -> None:
    """Held from before time passed, a transaction's `now()` is the earlier instant; held
    from after, the later one. Both end at the same time with the same rows, and merging
    them would leave the first's calls (which write leases from the earlier instant)
    unexplored."""
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    tables = state.Tables(reference_pool.monitor)
    hold, wait = Step("open_transaction", {"pick": 0}), Step("time_passes", {"to": "beat"})
    states = []
    for program in ([hold, wait], [wait, hold]):
        harness.reset()
        d = Driver(harness)
        for step in [*Scope().start(), *program]:
            getattr(d, step.rule)(**step.args)
        states.append(state.fingerprint(d, tables))
        d.teardown()
    assert states[0] != states[1]


def _explore(queue: str, processes: int, dsn: str, out: Path) -> tuple[int, list[str]]:
    """Run `leasecheck explore` over 2 moves on `dsn`'s server; return its exit code and
    its lines, the seconds taken cut from the closing one; check that it told its progress."""
    done = subprocess.run(
        [
            sys.executable, "-m", "leasecheck.cli", "explore", queue, "--moves", "2",
            "--processes", str(processes), "--pg-dsn", dsn, "--leasecheck-dir", str(out),
        ],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    # the search is never silent: each program length searched whole is told on stderr
    assert "leasecheck explore: programs of 1 move searched whole (" in done.stderr
    return done.returncode, [*lines[:-1], re.sub(r", [\d.]+ s$", "", lines[-1])]


@pytest.mark.parametrize(
    ("queue", "code"),
    [("leasecheck.reference.queue:ReferenceQueue", 0), ("mutants.naive:Naive", 1)],
)
def test_processes_search_what_one_process_does(
    leasecheck_server_dsn: str, tmp_path: Path, queue: str, code: int
) -> None:
    """Searchers in processes of their own count the same schedules and states as one
    process, and end in the same counterexample, which the parent saves (the timeline's
    lines are the parent's own replay of it)."""
    one = _explore(queue, 1, leasecheck_server_dsn, tmp_path / "one")
    two = _explore(queue, 2, leasecheck_server_dsn, tmp_path / "two")
    assert one[0] == two[0] == code, two
    assert [line for line in one[1] if "saved" not in line] == [
        line for line in two[1] if "saved" not in line
    ]
    assert len(list((tmp_path / "two").glob("*.json"))) == code


def test_the_clock_moves_can_be_named(leasecheck_server_dsn: str, tmp_path: Path) -> None:
    """`--time` narrows where time_passes lands, as the lease's-edge scope of every run
    does: just before a lease end at each resolution, or just past it."""
    edges = ["before-lease-end", "before-lease-end-ms", "before-lease-end-s", "past-lease-end"]
    done = subprocess.run(
        [
            sys.executable, "-m", "leasecheck.cli", "explore", "mutants.early_reclaim:EarlyReclaim",
            "--moves", "4", "--preemptions", "0", "--processes", "1",
            *(a for r in ("claim", "pause", "time_passes") for a in ("--rule", r)),
            *(a for t in edges for a in ("--time", t)),
            "--pg-dsn", leasecheck_server_dsn, "--leasecheck-dir", str(tmp_path),
        ],
        cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[exclusive-lease]" in done.stdout
    assert f"time_passes to {'/'.join(edges)}" in done.stdout.splitlines()[-1]


def test_the_default_number_of_processes_stays_under_a_servers_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a machine of many CPUs the default must not open more searchers (each a
    database and its connections) than a server's default max_connections allows."""
    from leasecheck import explore as command

    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(64)), raising=False)
    assert command._processes(None) == command.MOST_PROCESSES
    assert command._processes(16) == 16  # asked for: as asked
    assert command._processes(0) is None
