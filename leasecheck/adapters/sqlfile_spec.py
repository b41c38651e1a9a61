"""What a queue's `.sql` file declares, parsed strictly: its header, its queries, their keys.

One style for every declaration: `-- leasecheck: key=value ...` lines. Those before the
first `-- name:` block declare the queue (file keys); those right under a block's
description line declare that query (query keys). Every mistake is one line that starts
with the file's path and says how to fix it. The format is documented in
docs/sql-queues.md; `sqlfile_queue` runs what this module reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from leasecheck.adapters import sqltext
from leasecheck.stateful import sqlfile
from leasecheck.stateful.contract import CALLS, ContractError

REQUIRED = ("install", "reset", "enqueue", "claim", "heartbeat", "complete", "fail", "effect_key")
OPTIONAL = ("advance_clock", "state", "maintain")
CONSTANTS = ("lease", "max_attempts")
"""Parameters every query may name: the harness's lease (the call's own, in claim and
heartbeat) and the header's max_attempts."""
PARAMETERS: dict[str, tuple[str, ...]] = {
    "install": (),
    "reset": (),
    "enqueue": ("payload",),
    "claim": ("worker",),
    "heartbeat": ("id", "token", "worker"),
    "complete": ("id", "token", "worker"),
    "fail": ("id", "token", "worker", "error"),
    "effect_key": ("id", "token", "worker"),
    "advance_clock": ("delta",),
    "state": ("id",),
    "maintain": (),
}
HELD_CALLS = CALLS
"""The calls a worker may make inside a transaction the harness holds open."""
ACCEPTED = ("rows", "not_null", "first_column_true", "first_column_positive", "rowcount")
"""How a query says "accepted" (the default is rows):
rows: the answer has a row; not_null: its first row has a non-NULL value (a function
that answers an all-NULL composite for "no"); first_column_true: the first value is
true; first_column_positive: the first value is a number above 0 (a count row);
rowcount: the last statement changed a row (an update without `returning`)."""
ACCEPTS: dict[str, tuple[str, ...]] = {
    "claim": ("rows", "not_null"),
    "heartbeat": ACCEPTED,
    "complete": ACCEPTED,
    "fail": ACCEPTED,
}
_FLAGS = (
    "ordered_tokens",
    "heartbeats",
    "one_claim_per_worker",
    "revokes_expired",
    "transactional_effects",
)
FILE_KEYS = ("max_attempts", "name", "held_transactions", *_FLAGS)
QUERY_KEYS = ("accepted",)
_LINE = re.compile(r"^-- leasecheck:(.*)$", re.MULTILINE)
_PREFIX = "-- leasecheck:"


class SqlFileError(ContractError):
    """The `.sql` file does not describe a usable queue; the message names file and fix."""


@dataclass(frozen=True)
class Header:
    """What the file's `-- leasecheck:` lines before its first query declare."""

    max_attempts: int | None
    name: str | None = None
    ordered_tokens: bool = False
    heartbeats: bool = True
    held_calls: frozenset[str] = frozenset(HELD_CALLS)
    one_claim_per_worker: bool = False
    revokes_expired: bool = False
    transactional_effects: bool = True

    @property
    def held_transactions(self) -> bool:
        """Whether any call may run inside a transaction the harness holds open."""
        return bool(self.held_calls)


@dataclass(frozen=True)
class QuerySql:
    """One query as the adapter runs it."""

    name: str
    text: str
    """The SQL without its `-- leasecheck:` lines."""
    statements: tuple[str, ...]
    bound: bool
    """It names a parameter, so it runs with every parameter bound (`%%` is a percent)."""
    accepted: str = "rows"


@dataclass(frozen=True)
class Spec:
    """Everything a queue file declares."""

    header: Header
    queries: dict[str, QuerySql]
    """Every query but install, by name."""
    install: tuple[QuerySql, ...]
    """The install steps in file order, each run in a transaction of its own."""


def read(path: Path) -> Spec:
    """Return the declarations of the queue file at `path`; raise SqlFileError on any fault."""
    try:
        source = path.read_text()
    except OSError as exc:
        raise SqlFileError(f"{path}: cannot read it ({exc.strerror})") from None
    header = parse_header(path, source)
    try:
        found = sqlfile.blocks(path)
    except ValueError as exc:
        raise SqlFileError(str(exc)) from None
    known = (*REQUIRED, *OPTIONAL)
    unknown = sorted({q.name for q in found} - set(known))
    if unknown:
        raise SqlFileError(
            f"{path}: unknown queries {', '.join(unknown)}; a queue file holds {', '.join(known)}"
        )
    queries: dict[str, QuerySql] = {}
    steps: list[QuerySql] = []
    for block in found:
        query = _query(path, block)
        if query.name == "install":
            steps.append(query)
            continue
        if query.name in queries:
            raise SqlFileError(
                f"{path}: query {query.name!r} is defined twice; keep one "
                "(only install may repeat: each install block is one step)"
            )
        queries[query.name] = query
    needed = [q for q in REQUIRED if not (q == "heartbeat" and not header.heartbeats)]
    missing = [q for q in needed if q not in queries and not (q == "install" and steps)]
    if missing:
        raise SqlFileError(
            f"{path}: missing queries {', '.join(missing)} "
            "(add a '-- name: <query>' block for each)"
        )
    return Spec(header=header, queries=queries, install=tuple(steps))


def parse_header(path: Path, source: str) -> Header:
    """Return the declarations of the file's `-- leasecheck:` lines; raise on anything off."""
    first_query = source.find("-- name:")
    head = source if first_query < 0 else source[:first_query]
    values = _pairs(path, [w for line in _LINE.findall(head) for w in line.split()], None)
    if not values:
        raise SqlFileError(
            f"{path}: no '-- leasecheck: max_attempts=N ...' header before the first query"
        )
    if "max_attempts" not in values:
        raise SqlFileError(f"{path}: header lacks max_attempts=N (or max_attempts=none)")
    flags = {k: _flag(path, k, values[k]) for k in _FLAGS if k in values}
    held = values.get("held_transactions")
    return Header(
        max_attempts=_max_attempts(path, values["max_attempts"]),
        name=values.get("name"),
        held_calls=frozenset(HELD_CALLS) if held is None else _held_calls(path, held),
        **flags,
    )


def _pairs(path: Path, words: list[str], query: str | None) -> dict[str, str]:
    """Return `key=value` words as a dict, checking each key belongs where it stands."""
    where = "header" if query is None else f"query {query!r}:"
    values: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not value:
            raise SqlFileError(f"{path}: {where} word {word!r} is not key=value")
        if query is None and key in QUERY_KEYS:
            raise SqlFileError(
                f"{path}: header key {key!r} belongs to one query: put "
                f"'-- leasecheck: {key}={value}' under that query's description line"
            )
        if query is not None and key in FILE_KEYS:
            raise SqlFileError(
                f"{path}: query {query!r}: {key!r} declares the whole queue: move "
                f"'{key}={value}' to the '-- leasecheck:' header before the first query"
            )
        if key not in (FILE_KEYS if query is None else QUERY_KEYS):
            if query is None:
                raise SqlFileError(
                    f"{path}: unknown header key {key!r}; use {', '.join(FILE_KEYS)}"
                )
            raise SqlFileError(
                f"{path}: query {query!r}: unknown key {key!r}; a query declares "
                f"{', '.join(QUERY_KEYS)}"
            )
        if key in values:
            said = "header key" if query is None else f"query {query!r}: key"
            raise SqlFileError(f"{path}: {said} {key!r} given twice; keep one")
        values[key] = value
    return values


def _max_attempts(path: Path, value: str) -> int | None:
    if value == "none":
        return None
    if not value.isdigit() or int(value) < 1:
        raise SqlFileError(f"{path}: max_attempts={value}: give a positive integer or none")
    return int(value)


def _flag(path: Path, key: str, value: str) -> bool:
    if value not in ("true", "false"):
        raise SqlFileError(f"{path}: {key}={value}: give true or false")
    return value == "true"


def _held_calls(path: Path, value: str) -> frozenset[str]:
    if value in ("true", "false"):
        return frozenset(HELD_CALLS) if value == "true" else frozenset()
    calls = value.split(",")
    wrong = [c for c in calls if c not in HELD_CALLS]
    if wrong or len(set(calls)) != len(calls):
        raise SqlFileError(
            f"{path}: held_transactions={value}: give true, false or a comma list "
            f"(no spaces) of {', '.join(HELD_CALLS)}"
        )
    return frozenset(calls)


def _query(path: Path, block: sqlfile.Query) -> QuerySql:
    """Return one block as the adapter runs it, its keys and parameters checked."""
    name = block.name
    if block.description.startswith(_PREFIX[3:]):
        raise SqlFileError(
            f"{path}: query {name!r}: its first line must be a '-- description'; "
            "put the '-- leasecheck:' line under it"
        )
    lines = block.text.splitlines()
    keys = 0
    while keys < len(lines) and lines[keys].startswith(_PREFIX):
        keys += 1
    if any(line.startswith(_PREFIX) for line in lines[keys:]):
        raise SqlFileError(
            f"{path}: query {name!r}: a '-- leasecheck:' line inside the statement; "
            "put it right under the query's description line"
        )
    words = [w for line in lines[:keys] for w in line[len(_PREFIX) :].split()]
    values = _pairs(path, words, name)
    text = "\n".join(lines[keys:]).strip()
    if not text:
        raise SqlFileError(f"{path}: query {name!r} has no statement")
    accepted = values.get("accepted", "rows")
    if "accepted" in values and name not in ACCEPTS:
        raise SqlFileError(
            f"{path}: query {name!r}: accepted= applies only to "
            f"{', '.join(ACCEPTS)}; remove it here"
        )
    if accepted not in ACCEPTS.get(name, ACCEPTED):
        raise SqlFileError(
            f"{path}: query {name!r}: accepted={accepted}: give one of "
            f"{', '.join(ACCEPTS.get(name, ACCEPTED))}"
        )
    marks = sqltext.placeholders(text)
    allowed = (*PARAMETERS[name], *CONSTANTS)
    unknown = sorted(marks.names - set(allowed))
    if unknown:
        raise SqlFileError(
            f"{path}: query {name!r} names %({unknown[0]})s, which it is not given; "
            f"its parameters are {', '.join(allowed)}"
        )
    if marks.names and marks.problems:
        raise SqlFileError(
            f"{path}: query {name!r} holds {marks.problems[0]!r}: it names parameters, so "
            "write %% for a literal percent sign and %(name)s for a parameter"
        )
    statements = tuple(sqltext.statements(text))
    if not statements:
        raise SqlFileError(f"{path}: query {name!r} has no statement, only comments")
    return QuerySql(
        name=name, text=text, statements=statements, bound=bool(marks.names), accepted=accepted
    )
