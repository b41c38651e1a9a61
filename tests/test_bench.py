"""The benchmarks' own instruments: they measure what they claim to measure."""

from __future__ import annotations

from hypothesis.stateful import RuleBasedStateMachine

import mutants
from bench import ci_margin
from bench.hollow import Hollow
from bench.wire import Wire
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.wing.shards import Shard


def _shape(machine: type[RuleBasedStateMachine]) -> dict[str, dict[str, str]]:
    """Return each rule's name with its arguments' strategies, as Hypothesis sees them."""
    state = machine.setup_state()
    rules = [*state.initializers, *state.rules]
    return {r.function.__name__: {name: repr(s) for name, s in r.arguments.items()} for r in rules}


def test_the_hollow_machine_has_the_lease_machines_rules() -> None:
    """Hypothesis's cost per step depends on the rules and strategies it draws from."""
    assert _shape(Hollow) == _shape(LeaseMachine)


def test_wire_counts_one_round_trip_per_statement_by_kind(reference_dsn: str) -> None:
    """Simple and prepared statements each count once, sorted by what they touch, timed."""
    wire = Wire()
    with wire.traced(), clock.connect(reference_dsn) as conn:
        for _ in range(3):
            conn.execute("select 1")
        for _ in range(2):  # psycopg prepares in a round trip of its own, then binds
            conn.execute("select %s::int", [1], prepare=True)
        conn.execute("select 1;\nselect count(*)\nfrom leasecheck.effects")
        conn.execute("select pg_blocking_pids(pg_backend_pid())")
        conn.execute("select pg_sleep(0.05)")
    assert wire.counts == {"queue": 7, "oracle": 1, "lock watch": 1}
    assert min(min(s) for s in wire.seconds.values()) >= 0
    assert max(wire.seconds["queue"]) >= 0.05


def test_the_ci_margin_counts_broken_properties_per_shard(reference_pool: actors.Pool) -> None:
    """A ci shard on the naive queue breaks single-completion; on the reference, nothing."""
    naive = Harness(queue=contract.load(mutants.ALL["naive"]), pool=reference_pool)
    assert ci_margin.shard_verdict(naive, Shard(0, 8)) == "single-completion"
    reference = Harness(queue=ReferenceQueue(), pool=reference_pool)
    assert ci_margin.shard_verdict(reference, Shard(0, 8)) is None
