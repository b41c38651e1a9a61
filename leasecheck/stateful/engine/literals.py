"""A seeded run draws the same examples whatever else the process has imported.

Hypothesis mixes literals from every local module loaded so far into its draws: now
and then a draw takes one of them instead of a random value. The machine's own draws
are small numbers, which Hypothesis never takes from modules, but the chance its swarm
testing gives a rule of being left out of an example is drawn from 0..254, and 130 in
any module of the process could become it. So a derandomized run, or a run under a
fixed seed, played other examples after one more import, under `pytest -k`, or in
another xdist worker: the same seed did not replay the same search.

Nothing in a queue's Python source says anything about how to race its workers. While
the machine runs, the draws take Hypothesis's own constants and no module's; the
user's own Hypothesis tests, before and after, keep theirs. Set through the provider
module's collector and its cache; with a Hypothesis that has not both, `own` changes
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import settings, stateful
from hypothesis.internal.conjecture import providers


@contextmanager
def own() -> Iterator[None]:
    """Run the enclosed Hypothesis run with no constants from the process's modules."""
    collect = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    constants = getattr(providers, "Constants", None)
    if collect is None or cache is None or constants is None:
        yield
        return
    nothing = constants()
    cache.cache.clear()
    providers._get_local_constants = lambda: nothing
    try:
        yield
    finally:
        providers._get_local_constants = collect
        cache.cache.clear()


def run_state_machine_as_test(
    factory: Callable[[], stateful.RuleBasedStateMachine], *, settings: settings
) -> None:
    """Hypothesis's `run_state_machine_as_test` inside `own`.

    Same name and keyword on purpose: a derandomized run's seed is a digest of the
    factory's source (`lambda: LeaseMachine(h)` and the call around it), so call sites
    keep the examples they always had but for the module constants.
    """
    with own():
        # Hypothesis documents any factory returning a machine (a class or a function)
        # and calls it with no arguments, yet annotates the parameter as a class.
        run: Any = stateful.run_state_machine_as_test
        run(factory, settings=settings)
