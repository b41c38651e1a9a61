"""A seeded run plays the same examples whatever else the process has imported.

Hypothesis takes a draw now and then from the literals of the process's local modules.
The one draw of the machine's that module literals can reach is its swarm testing's
chance of leaving a rule out (0..254): a module with literals there moved a derandomized
run's examples, so a seed did not replay its search under `pytest -k` or in another
xdist worker. (Measured: a module holding them moved the examples of a run of 80.)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.internal.conjecture import providers

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful.engine import actors, literals
from leasecheck.stateful.machine import Harness, Machine, build
from tests.fixtures import derandomized

MODULE = "leasecheck_literals_probe"
EVERY_LITERAL = tuple(range(100, 255))
"""Every literal Hypothesis would take for a draw from 0..254 (it skips small ones)."""


@pytest.fixture
def literal_module(tmp_path: Path) -> Iterator[None]:
    """Import a module of the process's own (not a test file) holding `EVERY_LITERAL`."""
    (tmp_path / f"{MODULE}.py").write_text(f"VALUES = {EVERY_LITERAL!r}\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module(MODULE)
        yield
    finally:
        sys.modules.pop(MODULE, None)
        sys.path.remove(str(tmp_path))


def test_hypothesis_sees_the_module_and_the_run_does_not(literal_module: None) -> None:
    """The premise (Hypothesis takes the module's literals) and what `own` changes."""
    assert set(EVERY_LITERAL) <= set(providers._get_local_constants().integers)
    with literals.own():
        assert not providers._get_local_constants().integers
    assert set(EVERY_LITERAL) <= set(providers._get_local_constants().integers)


class _Looking(Machine):
    """The machine, noting what literals Hypothesis would draw from while it runs."""

    seen: set[int] = set()

    def teardown(self) -> None:
        _Looking.seen |= set(providers._get_local_constants().integers)
        super().teardown()


def test_a_seeded_run_draws_no_module_literals(
    literal_module: None, reference_pool: actors.Pool
) -> None:
    harness = Harness(queue=ReferenceQueue(), pool=reference_pool)
    harness.reset()
    _Looking.seen = set()
    literals.run_state_machine_as_test(
        lambda: build(shell=_Looking)(harness), settings=derandomized(3)
    )
    assert _Looking.seen == set()
    assert set(EVERY_LITERAL) <= set(providers._get_local_constants().integers)
