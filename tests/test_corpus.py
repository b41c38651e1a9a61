"""The foreign corpus (`bench/corpus/`): each clean queue keeps the contract, each
variant loads, and the kill benchmark's command line parses.

A clean queue runs on the plugin's own harness (`leasecheck_harness`), pointed at it
by overriding the two fixtures that name and install the queue, with a small
derandomized budget: a quick, repeatable guard that a change to the corpus did not
break a clean queue. The benchmark (`python -m bench.corpus_kills`) runs them whole,
through `leasecheck check`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import corpus, corpus_kills
from bench.corpus import visibility_sql
from leasecheck.adapters.sqlfile_queue import SqlFileQueue
from leasecheck.dbfixtures import janitor
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.sqlfile import blocks
from tests.fixtures import derandomized

BUDGET = derandomized(20)


@pytest.fixture(params=sorted(corpus.QUEUES))
def leasecheck_queue(request: pytest.FixtureRequest) -> Any:
    """Each clean queue of the corpus in turn (overrides the plugin's, for this module)."""
    entry = corpus.QUEUES[request.param]
    if entry.spec is None:
        return SqlFileQueue(visibility_sql.CLEAN)
    return contract.load(entry.spec)


@pytest.fixture
def leasecheck_installed_dsn(
    leasecheck_server_dsn: str, leasecheck_worker_label: str, leasecheck_queue: Any
) -> Iterator[str]:
    """A database of its own for each queue, with the harness and the queue installed."""
    label = f"{leasecheck_worker_label}_corpus"
    with janitor.temporary(leasecheck_server_dsn, label) as dsn:
        clock.prepare(dsn, leasecheck_queue)
        yield dsn


def test_the_clean_queue_keeps_the_contract(leasecheck_harness: Harness) -> None:
    assert leasecheck_harness.queue.name in corpus.QUEUES  # the override took
    run_state_machine_as_test(lambda: LeaseMachine(leasecheck_harness), settings=BUDGET)


@pytest.mark.parametrize("name", sorted(corpus.VARIANTS))
def test_each_variant_is_its_clean_queue_with_a_bug(name: str, tmp_path: Path) -> None:
    """A variant loads as a queue of its own name; a `.sql` variant replaces only
    blocks its clean file has, and the whole file it writes parses."""
    entry = corpus.VARIANTS[name]
    assert entry.bug and entry.queue in corpus.QUEUES
    if entry.spec is not None:
        queue = contract.load(entry.spec)
        assert queue.name == name
        clean = contract.load(str(corpus.QUEUES[entry.queue].spec))
        assert type(queue).__mro__[1] is type(clean)
        return
    assert entry.sql_variant is not None
    path = visibility_sql.write_variant(entry.sql_variant, tmp_path)
    assert f"name={name}" in path.read_text()
    names = [q.name for q in blocks(path)]
    assert names == [q.name for q in blocks(visibility_sql.CLEAN)]
    assert path.read_text() != visibility_sql.CLEAN.read_text()


def test_the_benchmark_command_line_parses() -> None:
    args = corpus_kills.parser().parse_args(
        ["--runs", "2", "--profile", "ci", "--only", "locked-jobs", "visibility-delete-by-id"]
    )
    assert (args.runs, args.profile) == (2, "ci")
    assert args.only == ["locked-jobs", "visibility-delete-by-id"]
    assert corpus_kills.parser().parse_args([]).profile == "dev"
    with pytest.raises(SystemExit):
        corpus_kills.parser().parse_args(["--only", "no-such-queue"])


def test_the_corpus_has_its_planted_bugs() -> None:
    """16 variants of the first batches and 7 of the short programs' batch, every clean
    queue with at least two."""
    assert len(corpus.VARIANTS) == 23
    for queue in corpus.QUEUES:
        assert sum(v.queue == queue for v in corpus.VARIANTS.values()) >= 2, queue
