"""A queue described only as named queries in one `.sql` file, driven through the contract.

So a queue written in Go, Elixir, Ruby or Node can be checked without writing Python:
copy its SQL into a file in the `-- name: x` format of `stateful.sqlfile` and run

    LEASECHECK_SQL_QUEUE=path/to/queue.sql \
        pytest --leasecheck-queue leasecheck.adapters.sqlfile_queue:from_env

Declarations are `-- leasecheck: key=value ...` lines: before the first query they
declare the queue, right under a query's description line they declare that query
(parsed strictly by `sqlfile_spec`; every mistake is one line saying how to fix it):

    -- leasecheck: max_attempts=3 ordered_tokens=true heartbeats=true

File keys: `max_attempts` (a positive integer or `none`; required), `name` (default: the
file's stem), `ordered_tokens`, `heartbeats`, `one_claim_per_worker`, `revokes_expired`,
`transactional_effects` (`true`/`false`), `held_transactions` (`true`, `false` or a
comma list of claim, heartbeat, complete, fail). Query key: `accepted` (how heartbeat,
complete, fail and claim say yes; `sqlfile_spec.ACCEPTED`).

Queries, the parameters each may name besides `lease` and `max_attempts` (which every
query may name), and what they must return (`%%` for a literal percent sign in every
query that names a parameter; a query that names none runs exactly as written):

| query | parameters | returns |
|---|---|---|
| install | none; may repeat: each block is one step | anything |
| reset | none | anything |
| enqueue | payload (jsonb) | one row: the job id |
| claim | worker, lease (the call's) | one row (job_id, token), or none |
| heartbeat | id, token, worker, lease (the call's) | accepted or not (`accepted=`) |
| complete | id, token, worker | accepted or not (`accepted=`) |
| fail | id, token, worker, error | accepted or not (`accepted=`) |
| effect_key | id, token, worker | one row, one text value: the idempotency key |
| advance_clock | delta (interval) | optional: for queues that do not read now() |
| state | id | optional: one row, one of queued, running, done, failed |
| maintain | none | optional: the queue's recovery sweep; anything |

A query may hold several statements: they run in order in one transaction (a savepoint
inside a held one) and the last one's answer counts. Install steps run in file order,
each in a transaction of its own: a one-statement step is sent alone, so CREATE INDEX
CONCURRENTLY works. `heartbeat` may be left out when the header says `heartbeats=false`.
`complete` runs in one transaction with the harness's effect, which runs only if it was
accepted. `effect_key` must be computed in SQL from the id and token alone (it is
evaluated right after the claim, on the claim's connection, and carried on the claim,
because the contract's `effect_key(claim)` gets no connection). docs/sql-queues.md has
the full format and a complete example.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from psycopg import Connection, Cursor
from psycopg.types.json import Jsonb

from leasecheck.adapters.sqlfile_spec import (
    OPTIONAL,
    Header,
    QuerySql,
    SqlFileError,
    parse_header,
    read,
)
from leasecheck.adapters.sqlfile_spec import REQUIRED as QUERIES
from leasecheck.stateful.contract import STATES, Claim, Effect, JobId

__all__ = ["ENV", "OPTIONAL", "QUERIES", "Header", "SqlClaim", "SqlFileError", "SqlFileQueue",
           "from_env", "parse_header"]  # fmt: skip

ENV = "LEASECHECK_SQL_QUEUE"
LEASE = timedelta(seconds=30)
"""The harness's lease (`stateful.units.LEASE`), given to queries that get none from
their call (install, enqueue, maintain, ...); claim and heartbeat get the call's own."""


@dataclass(frozen=True)
class SqlClaim(Claim):
    """A claim that carries the idempotency key its file computed for it at claim time."""

    key: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class _Answer:
    """What the last statement of a query answered."""

    columns: bool
    row: tuple[Any, ...] | None
    rowcount: int


def _plain(value: Any) -> JobId:
    """Return an id or token as the harness prints and compares it: int, else text."""
    return value if isinstance(value, int) and not isinstance(value, bool) else str(value)


class SqlFileQueue:
    """The contract, with every statement taken from one `.sql` file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        spec = read(self.path)
        header = spec.header
        self.spec = spec
        self.name = header.name or self.path.stem
        self.max_attempts = header.max_attempts
        self.ordered_tokens = header.ordered_tokens
        self.heartbeats = header.heartbeats
        self.held_calls: frozenset[str] = header.held_calls
        self.held_transactions = header.held_transactions
        self.one_claim_per_worker = header.one_claim_per_worker
        self.revokes_expired = header.revokes_expired
        self.transactional_effects = header.transactional_effects
        if "advance_clock" in spec.queries:
            self.advance_clock = self._advance_clock
        if "state" in spec.queries:
            self.state = self._state
        if "maintain" in spec.queries:
            self.maintain = self._maintain

    def _run(self, conn: Connection[Any], query: QuerySql, **params: Any) -> _Answer:
        """Run `query` with the parameters its call gives; return its last statement's answer.

        A query that names no parameter runs exactly as written; one statement runs alone
        (as v1 did), several run in order in one transaction (a savepoint inside a held one).
        """
        bound = {"lease": LEASE, "max_attempts": self.max_attempts, **params}
        if len(query.statements) == 1:
            return _answer(conn.execute(query.text, bound if query.bound else None))
        with conn.transaction():
            if not query.bound:
                cur = conn.execute(query.text)
                while cur.nextset():
                    pass
                return _answer(cur)
            for statement in query.statements:
                cur = conn.execute(statement, bound)
            return _answer(cur)

    def _row(self, conn: Connection[Any], name: str, **params: Any) -> tuple[Any, ...] | None:
        """Run the named query, which must answer with rows; return its first row."""
        answer = self._run(conn, self.spec.queries[name], **params)
        if not answer.columns:
            raise SqlFileError(
                f"{self.path}: query {name!r} returned no result set; "
                "end it with 'returning ...' (or make it a select)"
                + ("" if name in ("enqueue", "effect_key", "state") else ", or declare "
                   "'-- leasecheck: accepted=rowcount' under its description line")
            )  # fmt: skip
        return answer.row

    def _accepted(self, conn: Connection[Any], name: str, **params: Any) -> bool:
        """Run a heartbeat, completion or failure; return whether it was accepted."""
        query = self.spec.queries[name]
        if query.accepted == "rowcount":
            return self._run(conn, query, **params).rowcount > 0
        row = self._row(conn, name, **params)
        if query.accepted == "rows":
            return row is not None
        if query.accepted == "not_null":
            return row is not None and any(v is not None for v in row)
        value = None if row is None or not row else row[0]
        if query.accepted == "first_column_true":
            if value is not None and not isinstance(value, bool):
                raise SqlFileError(
                    f"{self.path}: query {name!r} answered {value!r}, not a boolean; "
                    "return true/false or change accepted="
                )
            return value is True
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | Decimal)):
            raise SqlFileError(
                f"{self.path}: query {name!r} answered {value!r}, not a count; "
                "return a number of rows or change accepted="
            )
        return value is not None and value > 0

    def install(self, conn: Connection[Any]) -> None:
        """Run each install step in a transaction of its own: alone when it is one
        statement (as CREATE INDEX CONCURRENTLY needs), else inside BEGIN ... COMMIT."""
        for step in self.spec.install:
            if len(step.statements) > 1 or conn.autocommit:
                self._run(conn, step)  # several statements: _run holds them in one transaction
            else:
                with conn.transaction():
                    self._run(conn, step)

    def reset(self, conn: Connection[Any]) -> None:
        self._run(conn, self.spec.queries["reset"])

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> JobId:
        row = self._row(conn, "enqueue", payload=Jsonb(payload))
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
        if self.spec.queries["claim"].accepted == "not_null" and all(v is None for v in row):
            return None
        job_id, token = _plain(row[0]), _plain(row[1])
        keyed = self._row(conn, "effect_key", id=job_id, token=token, worker=worker)
        if keyed is None or len(keyed) != 1 or not isinstance(keyed[0], str):
            raise SqlFileError(
                f"{self.path}: query 'effect_key' must return one row of one text value"
            )
        return SqlClaim(job_id=job_id, token=token, worker=worker, key=keyed[0])

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool:
        if "heartbeat" not in self.spec.queries:
            return False
        return self._accepted(conn, "heartbeat", **_owner(claim), lease=lease)

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        with conn.transaction():
            if not self._accepted(conn, "complete", **_owner(claim)):
                return False
            effect(conn)
            return True

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        return self._accepted(conn, "fail", **_owner(claim), error=error)

    def effect_key(self, claim: Claim) -> str:
        if not isinstance(claim, SqlClaim):
            raise TypeError(f"{self.name}: effect_key needs a claim this queue handed out")
        return claim.key

    def _advance_clock(self, conn: Connection[Any], delta: timedelta) -> None:
        self._run(conn, self.spec.queries["advance_clock"], delta=delta)

    def _state(self, conn: Connection[Any], job_id: JobId) -> str:
        row = self._row(conn, "state", id=job_id)
        if row is None or len(row) != 1:
            raise SqlFileError(
                f"{self.path}: query 'state' gave no single value for job {job_id!r}; "
                "return one row with the job's status"
            )
        if row[0] not in STATES:
            raise SqlFileError(
                f"{self.path}: query 'state' answered {row[0]!r} for job {job_id!r}; "
                f"map the queue's statuses to {', '.join(STATES)}"
            )
        return str(row[0])

    def _maintain(self, conn: Connection[Any]) -> None:
        self._run(conn, self.spec.queries["maintain"])


def _answer(cur: Cursor[Any]) -> _Answer:
    columns = cur.description is not None
    return _Answer(columns=columns, row=cur.fetchone() if columns else None, rowcount=cur.rowcount)


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
