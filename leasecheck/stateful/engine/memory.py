"""A bound on what Hypothesis keeps of each example while the machine runs.

Hypothesis's engine keeps the result of each of the last 10,000 test cases it ran,
every choice of each. A machine example makes hundreds of choices, so a `deep` run
grew by about 0.2 MiB an example, 1.3 GiB at 6,400 examples, and an xdist worker
on a CI runner holds one such run. The cache only spares the engine re-running a
test case it has run before; its tree of choices still knows which ones those are,
and what shrinking tries again is what it tried last. So while the machine runs the
cache holds the last `CACHE_SIZE` test cases; the user's own Hypothesis tests,
before and after, keep Hypothesis's default.

The bound is set through the engine's module constant, read when a run starts;
with a Hypothesis that no longer has it, `bounded` changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis.internal.conjecture import engine

CACHE_SIZE = 100
"""Test cases the engine keeps while the machine runs: about 20 MiB. A shard of a `deep`
run makes hundreds of examples: with 500 the cache filled at 5,000 examples and not at
1,000, so the peak grew with the run; with 100 it is full at both."""


@contextmanager
def bounded(size: int = CACHE_SIZE) -> Iterator[None]:
    """Run the enclosed Hypothesis run with a cache of at most `size` test cases."""
    if not hasattr(engine, "CACHE_SIZE"):
        yield
        return
    before = engine.CACHE_SIZE
    engine.CACHE_SIZE = min(size, before)
    try:
        yield
    finally:
        engine.CACHE_SIZE = before
