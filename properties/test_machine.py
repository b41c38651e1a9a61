"""Run the state machine against the queue under test (`--queue-impl`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from stateful import actors
from stateful.contract import Queue, not_checked
from stateful.machine import Harness, LeaseMachine
from stateful.plugin import excused, queue_under_test


@pytest.fixture
def harness(
    installed_dsn: str, queue_impl: Queue, request: pytest.FixtureRequest
) -> Iterator[Harness]:
    """Return a harness on this worker's database; write failure files when a test fails."""
    pool = actors.Pool(installed_dsn)
    h = Harness(queue=queue_impl, pool=pool, excused=excused(request.config))
    h.reset()
    try:
        yield h
    finally:
        if h.recorder.last:
            out = Path(request.config.getoption("--leasecheck-dir"))
            for path in h.recorder.write(out, request.node.name):
                print(f"leasecheck: wrote {path}")
        pool.close()


def test_queue_keeps_every_property(harness: Harness) -> None:
    """Simulated workers race over leased jobs; every property holds after every step."""
    run_state_machine_as_test(lambda: LeaseMachine(harness))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "gap" in metafunc.fixturenames:
        gaps = not_checked(queue_under_test(metafunc.config))
        gaps += [f"{p}: excused on the command line (--excuse)" for p in excused(metafunc.config)]
        if not gaps:
            name = queue_under_test(metafunc.config).name
            gaps = [f"nothing: {name} declares nothing that rules a property out"]
        metafunc.parametrize("gap", gaps, ids=[g.split(":")[0] for g in gaps])


def test_what_is_not_checked(gap: str) -> None:
    """Each property (or part) the queue's declarations rule out is reported, never passed."""
    pytest.skip(gap)
