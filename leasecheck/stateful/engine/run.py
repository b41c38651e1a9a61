"""What the engine needs of the run it plays in, and nothing more.

The harness (`stateful.harness.Harness`) meets this: the queue and its connections,
how the run is set up, what it has counted, and where a failure or a broken contract
is kept. The engine reads and writes the run through these members alone, so it
imports nothing of the story that renders and records them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from leasecheck.stateful.contract import Capabilities, Queue
from leasecheck.stateful.engine import actors, replan, shrinking
from leasecheck.stateful.history import History
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import Violation


class Run(Protocol):
    queue: Queue
    pool: actors.Pool
    excused: frozenset[str]
    """Properties not judged (`--leasecheck-excuse`)."""
    isolation: str
    restarts: bool
    shrink: shrinking.Budget
    replanned: list[replan.Saved]
    coverage: Counter[str]
    moves: Counter[str]
    broke_contract: tuple[str, tuple[Step, ...]] | None

    @property
    def caps(self) -> Capabilities: ...

    def can_replan(self) -> bool: ...

    def reset(self) -> None:
        """Empty the queue and the harness's tables between examples."""
        ...

    def failed(
        self, violation: Violation, program: Sequence[Step], history: History, facts: Any
    ) -> str:
        """Keep the failure of `violation` for its files; return its timeline."""
        ...

    def broke(self, history: History, program: Sequence[Step]) -> None:
        """Keep the story of an example in which the queue broke the contract."""
        ...
