"""Load named queries from a `.sql` file, procrastinate style.

A file is a list of blocks, each introduced by `-- name: <name>` and a one-line
`-- <description>`; the statement follows. Python refers to queries by name only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    """One named statement and the sentence that says what it is for."""

    name: str
    description: str
    text: str


def load(path: Path) -> dict[str, Query]:
    """Return the named queries of `path`; raise ValueError on a malformed file."""
    queries: dict[str, Query] = {}
    for query in blocks(path):
        if query.name in queries:
            raise ValueError(f"{path}: query {query.name!r} is defined twice")
        queries[query.name] = query
    return queries


def blocks(path: Path) -> list[Query]:
    """Return every block of `path` in file order, a repeated name included (a caller
    that gives repetition a meaning, such as install steps, checks names itself)."""
    source = path.read_text()
    parts = _HEADER.split(source)
    found: list[Query] = []
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = body.strip("\n").splitlines()
        if not lines or not lines[0].startswith("-- "):
            raise ValueError(f"{path}: query {name!r} needs a '-- description' line")
        text = "\n".join(lines[1:]).strip().rstrip(";")
        if not text:
            raise ValueError(f"{path}: query {name!r} has no statement")
        found.append(Query(name=name, description=lines[0][3:].strip(), text=text))
    return found
