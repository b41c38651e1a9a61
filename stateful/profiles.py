"""Hypothesis profiles: dev (quick), ci (default under CI, derandomized), deep (nightly).

Choose one with `--hypothesis-profile NAME` or $LEASECHECK_PROFILE; without either,
`ci` when $CI is set and `dev` otherwise. Failing examples are kept in
`.hypothesis/` and replayed first on the next run (except under `ci`, which is
derandomized and therefore replays by construction).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings

_COMMON: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
    "verbosity": Verbosity.normal,
    "phases": (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink),
}

PROFILES: dict[str, dict[str, Any]] = {
    "dev": {"max_examples": 100, "stateful_step_count": 30},
    "ci": {
        "max_examples": 300,
        "stateful_step_count": 40,
        "derandomize": True,
        "database": None,
        "print_blob": True,
    },
    "deep": {"max_examples": 5000, "stateful_step_count": 100},
}


def register() -> None:
    """Register the profiles and load the one the environment asks for."""
    for name, values in PROFILES.items():
        settings.register_profile(name, **{**_COMMON, **values})
    default = "ci" if os.environ.get("CI") else "dev"
    settings.load_profile(os.environ.get("LEASECHECK_PROFILE", default))
