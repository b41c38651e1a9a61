"""The harness: everything a run needs that outlives one example, and where it is written.

It is what the engine plays in (it meets the engine's `stateful.engine.run.Run`) and
what the story records to: the queue and its connections (the target), how the run
is set up (excused properties, schedule, isolation, the opening, the shrink budget),
and what it has done so far (its failures, coverage, the opening's stories and scopes).
It renders a failure's timeline and keeps its files' record here, so the engine
imports nothing of the story.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from leasecheck.stateful import clock
from leasecheck.stateful.contract import Capabilities, Queue, capabilities
from leasecheck.stateful.engine import actors, replan, shrinking
from leasecheck.stateful.history import History
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import Violation
from leasecheck.stateful.story.recorder import Failure, Recorder
from leasecheck.stateful.story.timeline import render
from leasecheck.stateful.units import SECOND


@dataclass
class Harness:
    """Everything an example needs that outlives it: the queue, connections, records."""

    queue: Queue
    pool: actors.Pool
    recorder: Recorder = field(default_factory=Recorder)
    excused: frozenset[str] = frozenset()
    """Properties not judged (`--leasecheck-excuse`): the matrix uses it to find the next one."""
    spec: str = ""
    """How the queue was named (`module:attr`), saved with a failure so it can be replayed."""
    coverage: Counter[str] = field(default_factory=Counter)
    """The dangerous situations of every example run on it so far (`stateful.verdict.coverage`)."""
    moves: Counter[str] = field(default_factory=Counter)
    """How often each move (rule) was made in every example run on it so far: the mix."""
    schedule: str = "random"
    """Who makes the workers' own moves (`--leasecheck-schedule`): random, pct or mixed."""
    replans: bool | None = None
    """Whether the `replan` move is offered (the server can put statistics back); None
    until asked. A test sets it False to show what only that move reaches."""
    replanned: list[replan.Saved] = field(default_factory=list)
    """The statistics the example's first replan replaced, put back by `reset`."""
    columns_forgotten: bool = False
    """Whether its first reset cleared the column statistics found on the queue's tables
    (`replan.forget_columns`), where replans are offered."""

    restarts: bool = True
    """Whether the `restart` move is offered. A test sets it False where one process per
    name is what it checks (a restarted process asks under the name again, holding
    nothing), or to show what only that move reaches."""
    isolation: str = "read-committed"
    """The level of held transactions (`--leasecheck-isolation`, `stateful.engine.isolation`)."""
    opens: bool = True
    """Whether a property run plays the opening's stories before its search
    (`--leasecheck-opening`)."""
    opening: str | None = None
    """The opening's story being played (`stateful.opening`), or the one that broke a
    property; None while Hypothesis searches."""
    played: int = 0
    """How many of the opening's stories were played on it."""
    searches: int = 1
    """How many times its budget each small scope of the opening gets (by profile)."""
    searched: list[dict[str, object]] = field(default_factory=list)
    """What the opening's small scopes searched whole came to (`stateful.exhaustive.layer`)."""
    shrink: shrinking.Budget = field(default_factory=shrinking.Budget)
    """How many examples Hypothesis may run after its first failure (`--leasecheck-shrink`)."""
    broke_contract: tuple[str, tuple[Step, ...]] | None = None
    """The timeline and program of the latest example in which the queue broke the
    contract: its story, told in the form of a violation's."""

    def can_replan(self) -> bool:
        if self.replans is None:
            self.replans = replan.supported(self.pool.monitor)
        return self.replans

    @property
    def caps(self) -> Capabilities:
        return capabilities(self.queue)

    def reset(self) -> None:
        """Empty the queue and the harness tables between examples, on a clean monitor.

        The monitor's clean-up and the clock's reset share one round trip.
        """
        self.shrink.count(failing=bool(self.recorder.last))
        actors.clean(self.pool.monitor, then=clock.QUERIES["reset"].text)
        self.queue.reset(self.pool.monitor)
        if not self.columns_forgotten and self.can_replan():
            replan.forget_columns(self.pool.monitor)  # as undo leaves them, from the start
            self.columns_forgotten = True
        if self.replanned:  # the next example meets the plans a fresh one meets
            replan.undo(self.pool.monitor, self.replanned)

    def failed(
        self, violation: Violation, program: Sequence[Step], history: History, facts: Any
    ) -> str:
        """Keep the failure of `violation` for its files; return its timeline."""
        timeline = render(history, SECOND)
        self.recorder.last[violation.prop] = Failure(
            violation, tuple(program), history, timeline, facts
        )
        return timeline

    def broke(self, history: History, program: Sequence[Step]) -> None:
        """Keep the story of an example in which the queue broke the contract."""
        self.broke_contract = (render(history, SECOND), tuple(program))
