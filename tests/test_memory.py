"""The machine's runs keep a bounded cache of test cases; the user's own keep Hypothesis's."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.internal.conjecture import engine

from leasecheck.stateful.engine import memory


def _cache_bound() -> int:
    """The bound of the cache a run started now would get, read off a real engine."""
    runner = engine.ConjectureRunner(lambda data: None, settings=settings(database=None))
    return int(runner._ConjectureRunner__data_cache.max_size)  # type: ignore[attr-defined]


def test_a_run_inside_gets_the_bound_and_one_after_hypothesis_default() -> None:
    default = _cache_bound()
    with memory.bounded(7):
        assert _cache_bound() == 7
    assert _cache_bound() == default
    assert default > memory.CACHE_SIZE  # else the bound would bound nothing


def test_the_default_comes_back_when_the_run_raises() -> None:
    default = _cache_bound()
    with pytest.raises(RuntimeError), memory.bounded(3):
        raise RuntimeError("a failing run")
    assert _cache_bound() == default


def test_the_bound_never_raises_what_a_user_set_lower() -> None:
    default = engine.CACHE_SIZE
    engine.CACHE_SIZE = 5
    try:
        with memory.bounded(500):
            assert _cache_bound() == 5
    finally:
        engine.CACHE_SIZE = default
