"""A failure is confirmed on fresh sessions before it is reported.

What a queue leaves on a connection is cleared between examples, but a verdict is a
public claim: before one is reported, its program is replayed once more on
connections opened for it alone. A failure that does not come back is reported as
such, with its files, and never as a verdict on the queue.
"""

from __future__ import annotations

from leasecheck.stateful.engine import actors
from leasecheck.stateful.harness import Harness
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import replay


def unconfirmed(harness: Harness, stories: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Replay each recorded failure on fresh sessions; return the properties that held.
    With `stories`, each confirmed replay's story (its lines, step by step) goes there."""
    gone = []
    for prop, failure in harness.recorder.last.items():
        pool = actors.Pool(harness.pool.dsn, clients=harness.pool.clients)
        fresh = Harness(queue=harness.queue, pool=pool, excused=harness.excused)
        story: list[str] = []
        try:
            fresh.reset()
            replay.replay(fresh, list(failure.program), say=story.append)
        except PropertyViolated as error:
            if error.violation.prop == prop:
                if stories is not None:
                    stories[prop] = tuple(story)
                continue
        finally:
            pool.close()
        gone.append(prop)
    return gone
