"""Shared plumbing for mutants: the reference queue, and the mutants' named queries."""

from __future__ import annotations

from pathlib import Path

from stateful.sqlfile import load

QUERIES = load(Path(__file__).with_name("queries.sql"))


def sql(name: str) -> str:
    """Return the text of one of the mutants' named queries."""
    return QUERIES[name].text
