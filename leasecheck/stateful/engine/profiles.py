"""Search budgets: dev (quick), ci (default under $CI, derandomized), deep (nightly).

Choose one with `--leasecheck-profile NAME` or $LEASECHECK_PROFILE; without either,
`ci` when $CI is set and `dev` otherwise. They are plain `settings` objects handed
to the machine, never registered or loaded as Hypothesis profiles: the user's own
Hypothesis tests keep whatever profile they load.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.database import DirectoryBasedExampleDatabase

_COMMON: dict[str, Any] = {
    "deadline": None,
    # Every health check is about how Hypothesis draws the programs, never about the
    # queue: none may stop a user's run or print its advice into their CI log.
    "suppress_health_check": list(HealthCheck),
    "verbosity": Verbosity.normal,
    "phases": (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
    # The blob's @reproduce_failure would point into site-packages; a failure file
    # and `leasecheck replay` reproduce it instead.
    "print_blob": False,
    # One failure per shard: a shard stops searching at its first failure and shrinks
    # that one (slipping to any smaller failure), instead of shrinking every property a
    # bad queue breaks, one after another. Other shards find the others; told once each.
    "report_multiple_bugs": False,
}

PROFILES: dict[str, dict[str, Any]] = {
    "dev": {"max_examples": 100, "stateful_step_count": 30},
    "ci": {"max_examples": 300, "stateful_step_count": 40, "derandomize": True},
    "deep": {"max_examples": 5000, "stateful_step_count": 100},
}

SEARCHES: dict[str, int] = {"dev": 1, "ci": 1, "deep": 10}
"""How many times its budget of schedules each small scope of the opening gets, per
profile (`stateful.exhaustive.layer`): `deep` searches whole what the others cut."""

SHRINKS: dict[str, int | None] = {"dev": 25, "ci": 25, "deep": None}
"""The most examples a shard runs to shrink its failure, per profile (None: Hypothesis's
own bound, 500 shrinks or 300 s). Counted in examples, not seconds, so a failure shrinks
alike on any machine; leasecheck's own pass then deletes the steps it does not need."""


def default() -> str:
    """Return the profile the environment asks for."""
    return os.environ.get("LEASECHECK_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


def shrinks(value: str, profile: str) -> int | None:
    """Return the shrink budget `--leasecheck-shrink` asks for: a count of examples,
    `full` for Hypothesis's own bound, or `profile` for the profile's."""
    if value == "profile":
        return SHRINKS[profile]
    if value == "full":
        return None
    return int(value)


def budget(name: str, examples_dir: Path | None) -> settings:
    """Return the settings of profile `name`.

    Failing examples are kept in `examples_dir` and tried first next time, except
    under `ci`, which is derandomized and replays by construction.
    """
    values = {**_COMMON, **PROFILES[name]}
    if values.get("derandomize") or examples_dir is None:
        values["database"] = None
    else:
        values["database"] = DirectoryBasedExampleDatabase(str(examples_dir))
    return settings(**values)
