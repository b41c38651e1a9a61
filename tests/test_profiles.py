"""The search budgets: no Hypothesis health check reaches a user's run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leasecheck.stateful.engine import profiles


@pytest.mark.parametrize("name", sorted(profiles.PROFILES))
def test_no_health_check_stops_a_run(name: str) -> None:
    """A draw Hypothesis finds too large would fail the run with its advice on writing
    strategies, which a queue's CI cannot act on; under every profile it runs."""
    budget = settings(profiles.budget(name, None), max_examples=2, derandomize=True)

    @budget
    @given(st.lists(st.binary(min_size=500, max_size=500), min_size=10, max_size=10))
    def large(blobs: list[bytes]) -> None:
        assert len(blobs) == 10

    large()
    assert set(budget.suppress_health_check) == set(HealthCheck)
