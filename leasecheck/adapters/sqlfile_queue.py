"""A queue described only as named queries in one `.sql` file, driven through the contract.

So a queue written in Go, Elixir, Ruby or Node can be checked without writing Python:
copy its SQL into a file in the `-- name: x` format of `stateful.sqlfile` and run

    LEASECHECK_SQL_QUEUE=path/to/queue.sql \
        pytest --leasecheck-queue leasecheck.adapters.sqlfile_queue:from_env

The file starts with a header that declares what the contract's optional members
would (parsed strictly: an unknown key, a bad value or a missing `max_attempts` is
an error):

    -- leasecheck: max_attempts=3 ordered_tokens=true heartbeats=true

keys: `max_attempts` (a positive integer or `none`; required), `name` (the report's
label; default: the file's stem), `ordered_tokens`, `heartbeats`, `held_transactions`
(`true`/`false`; defaults as in `stateful.contract.capabilities`).

Queries, their parameters and what they must return (`%%` for a literal percent sign
in every query that takes parameters):

| query | parameters | returns |
|---|---|---|
| install | none (may hold many statements) | anything; runs in one transaction |
| reset | none (may hold many statements) | anything |
| enqueue | payload (jsonb), max_attempts | one row: the job id |
| claim | worker, lease (interval) | one row (job_id, token), or none |
| heartbeat | id, token, worker, lease | a row when accepted, none when rejected |
| complete | id, token, worker | a row when accepted, none when rejected |
| fail | id, token, worker, error, max_attempts | a row when accepted, none when rejected |
| effect_key | id, token, worker | one row, one text value: the idempotency key |
| advance_clock | delta (interval) | optional: for queues that do not read now() |

`heartbeat` may be left out when the header says `heartbeats=false`. `complete` runs
in one transaction with the harness's effect, which runs only if it returned a row.
`effect_key` must be computed in SQL from the id and token alone (it is evaluated
right after the claim, on the claim's connection, and carried on the claim, because
the contract's `effect_key(claim)` gets no connection).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from leasecheck.stateful import sqlfile
from leasecheck.stateful.contract import Claim, ContractError, Effect, JobId

ENV = "LEASECHECK_SQL_QUEUE"
QUERIES = (
    "install",
    "reset",
    "enqueue",
    "claim",
    "heartbeat",
    "complete",
    "fail",
    "effect_key",
)
OPTIONAL = ("advance_clock",)
_HEADER = re.compile(r"^-- leasecheck:(.*)$", re.MULTILINE)
_FLAGS = ("ordered_tokens", "heartbeats", "held_transactions")
_KEYS = ("max_attempts", "name", *_FLAGS)


class SqlFileError(ContractError):
    """The `.sql` file does not describe a usable queue; the message names file and fix."""


@dataclass(frozen=True)
class SqlClaim(Claim):
    """A claim that carries the idempotency key its file computed for it at claim time."""

    key: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Header:
    """What the `-- leasecheck:` header declares."""

    max_attempts: int | None
    name: str | None = None
    ordered_tokens: bool = False
    heartbeats: bool = True
    held_transactions: bool = True


def parse_header(path: Path, source: str) -> Header:
    """Return the declarations of the file's `-- leasecheck:` lines; raise on anything off."""
    first_query = source.find("-- name:")
    head = source if first_query < 0 else source[:first_query]
    words = [w for line in _HEADER.findall(head) for w in line.split()]
    if not words:
        raise SqlFileError(
            f"{path}: no '-- leasecheck: max_attempts=N ...' header before the first query"
        )
    values: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not value:
            raise SqlFileError(f"{path}: header word {word!r} is not key=value")
        if key not in _KEYS:
            raise SqlFileError(f"{path}: unknown header key {key!r}; use {', '.join(_KEYS)}")
        if key in values:
            raise SqlFileError(f"{path}: header key {key!r} given twice")
        values[key] = value
    if "max_attempts" not in values:
        raise SqlFileError(f"{path}: header lacks max_attempts=N (or max_attempts=none)")
    return Header(
        max_attempts=_max_attempts(path, values["max_attempts"]),
        name=values.get("name"),
        **{k: _flag(path, k, values[k]) for k in _FLAGS if k in values},
    )


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


def _plain(value: Any) -> JobId:
    """Return an id or token as the harness prints and compares it: int, else text."""
    return value if isinstance(value, int) and not isinstance(value, bool) else str(value)


class SqlFileQueue:
    """The contract, with every statement taken from one `.sql` file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:
            source = self.path.read_text()
        except OSError as exc:
            raise SqlFileError(f"{self.path}: cannot read it ({exc.strerror})") from None
        header = parse_header(self.path, source)
        try:
            self.queries = {n: q.text for n, q in sqlfile.load(self.path).items()}
        except ValueError as exc:
            raise SqlFileError(str(exc)) from None
        known = (*QUERIES, *OPTIONAL)
        unknown = sorted(set(self.queries) - set(known))
        if unknown:
            raise SqlFileError(
                f"{self.path}: unknown queries {', '.join(unknown)}; a queue file holds "
                f"{', '.join(known)}"
            )
        needed = [q for q in QUERIES if not (q == "heartbeat" and not header.heartbeats)]
        missing = [q for q in needed if q not in self.queries]
        if missing:
            raise SqlFileError(
                f"{self.path}: missing queries {', '.join(missing)} "
                "(add a '-- name: <query>' block for each)"
            )
        self.name = header.name or self.path.stem
        self.max_attempts = header.max_attempts
        self.ordered_tokens = header.ordered_tokens
        self.heartbeats = header.heartbeats
        self.held_transactions = header.held_transactions
        if "advance_clock" in self.queries:
            self.advance_clock = self._advance_clock

    def _row(self, conn: Connection[Any], query: str, **params: Any) -> tuple[Any, ...] | None:
        """Run one named query with the documented parameters; return its first row."""
        cur = conn.execute(self.queries[query], params)
        if cur.description is None:
            raise SqlFileError(
                f"{self.path}: query {query!r} returned no result set; "
                "end it with 'returning ...' (or make it a select)"
            )
        return cur.fetchone()

    def install(self, conn: Connection[Any]) -> None:
        with conn.transaction():
            conn.execute(self.queries["install"])

    def reset(self, conn: Connection[Any]) -> None:
        conn.execute(self.queries["reset"])

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> JobId:
        row = self._row(conn, "enqueue", payload=Jsonb(payload), max_attempts=self.max_attempts)
        if row is None:
            raise SqlFileError(f"{self.path}: query 'enqueue' returned no row; return the job id")
        return _plain(row[0])

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        row = self._row(conn, "claim", worker=worker, lease=lease)
        if row is None:
            return None
        if len(row) != 2:
            raise SqlFileError(
                f"{self.path}: query 'claim' returned {len(row)} columns; return (job_id, token)"
            )
        job_id, token = _plain(row[0]), _plain(row[1])
        keyed = self._row(conn, "effect_key", id=job_id, token=token, worker=worker)
        if keyed is None or len(keyed) != 1 or not isinstance(keyed[0], str):
            raise SqlFileError(
                f"{self.path}: query 'effect_key' must return one row of one text value"
            )
        return SqlClaim(job_id=job_id, token=token, worker=worker, key=keyed[0])

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        if "heartbeat" not in self.queries:
            return False
        return self._row(conn, "heartbeat", **_owner(claim), lease=lease) is not None

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            if self._row(conn, "complete", **_owner(claim)) is None:
                return False
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        params = {**_owner(claim), "error": error, "max_attempts": self.max_attempts}
        return self._row(conn, "fail", **params) is not None

    def effect_key(self, claim: Claim) -> str:
        if not isinstance(claim, SqlClaim):
            raise TypeError(f"{self.name}: effect_key needs a claim this queue handed out")
        return claim.key

    def _advance_clock(self, conn: Connection[Any], delta: timedelta) -> None:
        conn.execute(self.queries["advance_clock"], {"delta": delta})


def _owner(claim: Claim) -> dict[str, Any]:
    return {"id": claim.job_id, "token": claim.token, "worker": claim.worker}


def from_env() -> SqlFileQueue:
    """Return the queue of the file `$LEASECHECK_SQL_QUEUE` names (for `--leasecheck-queue`)."""
    path = os.environ.get(ENV)
    if not path:
        raise SqlFileError(
            f"${ENV} is not set: point it at a queue's .sql file (e.g. adapters/sql/reference.sql)"
        )
    return SqlFileQueue(path)
