"""The shrink budget (`--leasecheck-shrink`): how many examples Hypothesis may run after a
shard's first failure before the machine stops it.

Shrinking is most of what a failing run costs: one shard's shrink took a mutant's `ci`
run to 310 s against the reference's 14 s pass. Past the budget the machine raises
`ShrinkSpent` at an example's end, and the suite tells the newest failing program of the
shard's first property, confirmed and shortened as always. Counted in examples, not
seconds, so a failure is cut alike on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis.control import current_build_context, currently_in_test_context

from leasecheck.stateful.properties import PropertyViolated


class ShrinkSpent(BaseException):
    """Raised at the end of the example that spends the budget, to stop Hypothesis.

    A BaseException because Hypothesis takes every Exception for a failure of the test;
    this one leaves its engine as a skip does. `met` is the first error other than a
    property's failure that the shrink met (a contract error, the harness's own): it
    must not be lost behind the verdict, so the suite raises it instead.
    """

    def __init__(self, limit: int, met: Exception | None) -> None:
        super().__init__(limit, met)
        self.limit, self.met = limit, met


@dataclass
class Budget:
    """One harness's shrink budget, and what it has spent."""

    limit: int | None = None
    """The most examples after the first failure; None leaves Hypothesis its own bound."""
    run: int = 0
    """Examples begun since the first recorded failure."""
    met: Exception | None = None
    """The first error other than a property's failure that an example of the shrink
    ended with."""

    def count(self, failing: bool) -> None:
        """Count an example begun (`failing`: a failure is recorded already)."""
        if failing:
            self.run += 1

    def end(self, error: BaseException | None) -> None:
        """Stop Hypothesis if the budget is spent, at the end of an example that ended with
        `error` (None when it ran through). An interrupt or a skip goes on as it is."""
        shrinking = self.run > 0 and currently_in_test_context()
        if not shrinking or current_build_context().is_final:
            return  # outside a search, or Hypothesis's own replay of what it shrank
        if isinstance(error, Exception) and not isinstance(error, PropertyViolated):
            self.met = self.met or error
        elif error is not None and not isinstance(error, Exception):
            return
        if self.limit is not None and self.run > self.limit:
            raise ShrinkSpent(self.limit, self.met)
