"""The isolation level of held transactions (`--leasecheck-isolation`), as program data.

A queue's calls run inside transactions the harness holds open (`open_transaction`,
`claim(held=True)`). At READ COMMITTED, the default, a statement that meets a row
changed since it began re-reads it; at REPEATABLE READ and SERIALIZABLE, PostgreSQL
raises a serialization failure (40001) instead, which is the queue's answer (Raised:
its "no"), read by the one reader; the transaction is then in error and ended. With
a level other than the default, each held transaction's level is an argument of its
step (`drawn`: each one draws it, simplest READ COMMITTED first), so a failure
replays and shrinks with its levels, whatever option the replay runs under.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import strategies as st

from leasecheck.stateful.sqlfile import load

LEVELS = ("read committed", "repeatable read", "serializable")
"""The levels a held transaction may run at, simplest first."""

MODES = ("read-committed", "repeatable-read", "serializable", "drawn")
"""What `--leasecheck-isolation` takes."""

DEFAULT = "read-committed"

_BEGIN = load(Path(__file__).with_name("faults.sql"))


def begin(level: str | None) -> str:
    """Return the statement that opens a held transaction at `level` (None: the default)."""
    if level is None:
        return "begin"
    if level not in LEVELS:
        raise ValueError(f"unknown isolation level {level!r}; one of {', '.join(LEVELS)}")
    return _BEGIN[f"begin_{level.replace(' ', '_')}"].text


def from_env() -> str:
    """Return the mode `$LEASECHECK_ISOLATION` names, else the default."""
    return os.environ.get("LEASECHECK_ISOLATION", DEFAULT)


def strategy(mode: str) -> st.SearchStrategy[str]:
    """Return what a held transaction's level is drawn from under `mode`."""
    if mode == "drawn":
        return st.sampled_from(LEVELS)
    return st.just(mode.replace("-", " "))
