"""leasecheck's property tests, to run in a queue's own repository.

One file adopts them, e.g. `tests/test_leasecheck.py`:

    from leasecheck.suite import *  # noqa: F403

with the queue named once, in `pyproject.toml`:

    [tool.pytest.ini_options]
    leasecheck_queue = "myqueue.queue:Queue"

Then `pytest -n auto` runs the properties beside the queue's own tests. Only these
tests run, never leasecheck's own. `pytest --pyargs leasecheck.suite` runs them
without a file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import seed, settings
from hypothesis.stateful import run_state_machine_as_test

from leasecheck.shards import Shard
from leasecheck.stateful import replay
from leasecheck.stateful.machine import Harness, LeaseMachine

__all__ = [
    "test_leasecheck_properties",
    "test_leasecheck_regression",
    "test_leasecheck_what_is_not_checked",
]


def test_leasecheck_properties(
    leasecheck_harness: Harness,
    leasecheck_shard: Shard,
    leasecheck_budget: settings,
    leasecheck_out: Path,
) -> None:
    """Simulated workers race over leased jobs; every property holds after every step."""

    def machine() -> LeaseMachine:
        return LeaseMachine(leasecheck_harness)

    if leasecheck_budget.derandomize:
        machine = seed(leasecheck_shard.seed)(machine)
    with _failure_files(leasecheck_harness, leasecheck_out):
        run_state_machine_as_test(
            machine,  # type: ignore[arg-type]  # any factory will do, as Hypothesis documents
            settings=leasecheck_shard.budget(leasecheck_budget),
        )


def test_leasecheck_what_is_not_checked(leasecheck_gap: str) -> None:
    """Each property (or part) the queue's declarations rule out is reported, never passed."""
    pytest.skip(leasecheck_gap)


def test_leasecheck_regression(
    leasecheck_harness: Harness, leasecheck_regression: Path | None
) -> None:
    """A committed failure file replays step by step, and every property holds."""
    if leasecheck_regression is None:
        pytest.skip(
            "no failure files to replay: commit some and name their directory with "
            "--leasecheck-regressions DIR or leasecheck_regressions in the pytest config"
        )
    try:
        saved = replay.load(leasecheck_regression)
    except ValueError as exc:
        pytest.fail(f"leasecheck: {exc}", pytrace=False)
    replay.replay(leasecheck_harness, saved.steps)


@contextmanager
def _failure_files(harness: Harness, out: Path) -> Iterator[None]:
    """On a failure, write its files and tell the reader how to replay it."""
    try:
        yield
    except BaseException as error:
        if harness.recorder.last:
            written = harness.recorder.write(out, harness.queue.name, harness.spec)
            for path in (p for p in written if p.suffix == ".json"):
                error.add_note(f"leasecheck: saved {path} (.txt, .svg beside it)")
                error.add_note(f"leasecheck: replay it with: leasecheck replay {path}")
        raise
