"""A search budget that runs alike every time, for tests that assert what it finds."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings


def budget(examples: int) -> settings:
    """A budget of `examples` that runs alike every time: fixed seed, no shrinking, no
    database of examples, the first failure reported as it is. A test that asserts what
    a search finds must not pass or fail by the draw of the day."""
    return settings(
        max_examples=examples,
        stateful_step_count=30,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
