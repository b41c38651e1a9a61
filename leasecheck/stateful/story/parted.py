"""Where two runs of one program parted: the first line in which their stories differ.

Hypothesis says that one program met different answers when it ran again (its
FlakyStrategyDefinition), not where. The machine keeps each example's story, each line
marked with the step it was told in; when that error comes, the example that raised it
is set beside the earlier one whose program shares the most steps with it, and the first
line in which their stories differ within those steps is the answer the program did not
decide (a claim that took a job once and nothing the next time, say). That line is what
found a race in the harness's own crash handling; it is what a queue's author needs to
find theirs (ties broken by random ids, the real clock).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from leasecheck.stateful.program import Step

KEPT = 1000
"""How many examples' stories are kept (the latest): enough for a search's budget."""


@dataclass
class Stories:
    """The latest examples' programs and stories, line by line with their step."""

    kept: deque[tuple[list[Step], list[tuple[int, str]]]] = field(
        default_factory=lambda: deque(maxlen=KEPT)
    )

    def begin(self, program: list[Step]) -> None:
        """A new example starts; `program` is its list of steps, as it grows."""
        self.kept.append((program, []))

    def told(self, line: str) -> None:
        """Keep a line of the current example's story, marked with its step."""
        if self.kept:
            program, lines = self.kept[-1]
            lines.append((len(program), line))

    def parted(self) -> str | None:
        """Say where the latest example's story first differs from the earlier example
        that shares the most steps with it; None when no earlier one differs in them."""
        if len(self.kept) < 2:
            return None
        program, lines = self.kept[-1]
        earlier = list(self.kept)[:-1]
        other, theirs = max(earlier, key=lambda e: _shared(program, e[0]))
        steps = _shared(program, other)
        mine = [line for line in lines if line[0] <= steps]
        before_mine = [line for line in theirs if line[0] <= steps]
        for (step, ours), (_, before) in zip(mine, before_mine, strict=False):
            if ours != before:
                where = f"step {step}, {program[step - 1]}" if step else "the start"
                return (
                    f"the two runs parted at {where}: this run told {_one_line(ours)!r}, "
                    f"an earlier run of the same steps {_one_line(before)!r}"
                )
        return None


def _shared(one: list[Step], other: list[Step]) -> int:
    """Return how many steps two programs share from their start."""
    n = 0
    for a, b in zip(one, other, strict=False):
        if a != b:
            break
        n += 1
    return n


def _one_line(text: str) -> str:
    return " ".join(text.split())
