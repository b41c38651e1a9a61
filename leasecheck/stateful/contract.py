"""What a queue under test implements, and how the suite finds it.

The harness owns every connection; an implementation runs its SQL on the
connection it is given, changes transactions only through `with conn.transaction():`
and keeps no state between calls except in the database. Optional members declare
capabilities; the suite skips the properties that need a missing one and names it.

A queue whose library opens its own connections (a pool, an engine, a client in
another driver) declares `connect(name, dsn)` instead (`Clients`): each simulated worker
gets a DSN of its own through the harness's stepping proxy, and the worker's calls get
the client `connect` returned in place of a connection.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, cast, runtime_checkable

from psycopg import Connection

JobId = int | str
Effect = Callable[[Connection[Any]], None]
BatchEffect = Callable[[Connection[Any], Any], None]
"""`complete_many`'s effect: `effect(conn, claim)` for each claim the batch accepts."""

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
STATES = (QUEUED, RUNNING, DONE, FAILED)
"""What `state(conn, job_id)` may answer, read from the queue's own tables:
`queued` (waiting, or scheduled for a retry), `running` (granted to a worker, its
lease expired or not), `done` (completed) and `failed` (given up for good)."""

REQUIRED = (
    "name",
    "max_attempts",
    "install",
    "reset",
    "enqueue",
    "claim",
    "heartbeat",
    "complete",
    "fail",
    "effect_key",
)


@dataclass(frozen=True)
class Claim:
    """One grant of one job to one worker; `token` is the queue's fencing token.

    A convenience: a queue may hand out any object with `job_id`, `token` and
    `worker` attributes, or a `(job_id, token, worker)` tuple, and gets that same
    object back in `heartbeat`, `complete`, `fail` and `effect_key`.
    """

    job_id: JobId
    token: Hashable
    worker: str


def as_claim(value: Any) -> Claim:
    """Return the harness's reading of a claim the queue handed out."""
    if isinstance(value, Claim):
        return value
    if isinstance(value, tuple) and len(value) == 3:
        return Claim(*value)
    try:
        return Claim(job_id=value.job_id, token=value.token, worker=value.worker)
    except AttributeError:
        raise ContractError(
            f"claim() returned a {type(value).__name__}: return None, an object with "
            "job_id, token and worker attributes, or a (job_id, token, worker) tuple"
        ) from None


@runtime_checkable
class Queue(Protocol):
    """What every queue under test implements; see the module docstring for the rules.

    `Claim` in these signatures stands for whatever claim object the queue hands
    out (see `Claim`); the harness passes it back unchanged.
    """

    name: str
    max_attempts: int | None

    def install(self, conn: Connection[Any]) -> None:
        """Create its schema in an empty database."""

    def reset(self, conn: Connection[Any]) -> None:
        """Empty it as a fresh install leaves it (`TRUNCATE ... RESTART IDENTITY`)."""

    def enqueue(self, conn: Connection[Any], payload: dict[str, Any]) -> JobId:
        """Add one job; return the id the queue made up for it."""

    def claim(self, conn: Connection[Any], worker: str, lease: timedelta) -> Claim | None:
        """Take one job for `worker` until the lease runs out, or None when none is ready."""

    def heartbeat(self, conn: Connection[Any], claim: Claim, lease: timedelta) -> bool | None:
        """Renew the lease: True only if the claim still owns the job and the lease moved
        (not needed by a queue that declares `heartbeats = False`)."""

    def complete(self, conn: Connection[Any], claim: Claim, effect: Effect) -> bool:
        """Finish the job and run `effect(conn)` in the transaction that checks ownership."""

    def fail(self, conn: Connection[Any], claim: Claim, error: str) -> bool:
        """Hand the job back for a retry, or give it up at the cap: True if the claim owned it."""

    def effect_key(self, claim: Claim) -> str:
        """The idempotency key for effects outside the database: from the job id, never
        the attempt."""


@runtime_checkable
class Clients(Protocol):
    """What a queue that opens its own connections adds to `Queue`.

    `connect(name, dsn)` opens the library's client (its pool, engine or connection) for
    one of the harness's sessions: a worker (`w1`), its heartbeat (`w1/beat`) or the
    recovery sweep (`sweeper`). Every connection the client opens on `dsn`, now or later,
    in any thread, is that session's: the harness pauses it between round trips,
    terminates it in a crash and watches its lock waits, through a stepping proxy
    (`leasecheck.proxy`) that `dsn` points at. `claim`, `heartbeat`, `complete`, `fail`
    and `maintain` then get that client where they would get a connection; `install`,
    `reset`, `enqueue`, `state` and `advance_clock` still get the harness's own
    connection. `disconnect(client)` closes it when its session ends for good (a crash,
    a cut, the end of a run); its connections may be dead by then. A healthy client is
    kept for a later example, under another session's name, as the harness keeps its
    own connections: `name` is for the library's logs, and the worker a call is for is
    its `worker` argument, as always. Nothing cleans its sessions between examples, so,
    as every queue here, it keeps no state between calls but in the database.

    Such a queue's calls run on connections the harness cannot open a transaction on,
    so it declares neither `held_transactions` nor `transactional_effects` (both False),
    and the lock-timeout fault (`time_out`, a setting on the harness's session) is not
    played. Its connections must be quiet between calls: a poller or listener that
    sends on its own, between the harness's steps, would make a run depend on timing.
    """

    def connect(self, name: str, dsn: str) -> Any:
        """Open the library's client for the session `name` on `dsn`."""

    def disconnect(self, client: Any) -> None:
        """Close a client `connect` returned."""


def clients(queue: object) -> Clients | None:
    """Return `queue` as `Clients` when it opens its own connections, else None."""
    if getattr(queue, "connect", None) is None:
        return None
    if not callable(getattr(queue, "disconnect", None)):
        raise ContractError(
            f"{getattr(queue, 'name', queue)}: it has connect() but no disconnect(client); "
            "add one that closes the client connect() returned"
        )
    return cast(Clients, queue)


@dataclass(frozen=True)
class Capabilities:
    """What an implementation declares beyond the required members.

    - `ordered_tokens`: tokens of one job strictly increase (checked by fencing).
    - `held_transactions`: its calls may run inside a transaction the harness holds open.
    - `heartbeats`: it can extend a lease at all (the story's naive queue cannot).
    - `heartbeat_answers`: its heartbeat's answer is one its users see. A library
      whose heartbeat is fire and forget (it answers nothing, raises nothing and
      cancels nothing) declares False: the machine still sends it, so the library
      keeps the lease, but judges nothing from it (the answer is unknown).
    - `heartbeat_renews`: what one accepted heartbeat renews: `"claim"` (the default),
      the claim it names; `"worker"`, every claim its worker holds whose lease still
      runs (a process-level lease: one beat of a worker process keeps all its jobs, as
      procrastinate's and chancy's workers do). The judge then believes each of those
      leases renewed too, and a claim of one of them inside the renewed lease is an
      exclusive-lease violation.
    - `advance_clock`: its own way to move time forward, for queues that do not read
      `now()`; called as `advance_clock(conn, delta)`.
    - `state`: `state(conn, job_id) -> str`, the job's status as the queue's tables
      show it (one of `STATES`); without it, no-lost-jobs is not judged.
    - `maintain`: `maintain(conn) -> None`, the queue's own recovery sweep (a reaper,
      rescuer or lifeline), run by the machine on a connection of its own.
    - `revokes_expired`: by design, the queue's recovery revokes an expired lease even
      when nobody else claims the job, so a late owner's result may be refused.
    - `transactional_effects`: `complete` runs `effect` in the transaction that
      records the completion. A library whose task body runs before and outside its
      completion declares False: the machine then runs the effect as the task body,
      before `complete`, and passes a no-op effect.
    - `held_calls`: which of `CALLS` may run inside a transaction the harness holds
      open (all of them when `held_transactions`, none otherwise, unless the queue
      names them as `held_calls`).
    - `one_claim_per_worker`: a worker of the queue runs one job at a time; the
      machine never gives a worker a second job while it holds one.
    - `claim_many`: `claim_many(conn, worker, lease, n) -> list[claim]`, up to `n`
      jobs in one call.
    - `complete_many`: `complete_many(conn, claims, effect) -> list[bool]`, one answer
      per claim; it calls `effect(conn, claim)` for each claim it accepts, in the
      transaction that records the completions.
    - `max_failures`: the queue gives a job up for good at its `max_failures`-th
      accepted failure report, and never hands it out after that. For a library whose
      cap counts failures (exceptions), not deliveries: a claim lost to a crash or an
      expired lease does not count, and `max_attempts` may be None (no cap on claims).
      Both may be set (a cap on deliveries, and a failure that is final: 1).
    - `connects`: not declared but read off the queue: it has `connect(name, dsn)` and
      `disconnect(client)` (`Clients`), so it opens its own connections, and its calls
      get its client where they would get a connection.
    """

    ordered_tokens: bool
    held_transactions: bool
    heartbeats: bool
    advance_clock: Callable[[Connection[Any], timedelta], None] | None
    state: Callable[[Connection[Any], JobId], str] | None = None
    maintain: Callable[[Connection[Any]], None] | None = None
    revokes_expired: bool = False
    transactional_effects: bool = True
    heartbeat_answers: bool = True
    heartbeat_renews: str = "claim"
    held_calls: frozenset[str] = frozenset()
    one_claim_per_worker: bool = False
    claim_many: Callable[[Connection[Any], str, timedelta, int], list[Any]] | None = None
    complete_many: Callable[[Connection[Any], list[Any], BatchEffect], list[bool]] | None = None
    max_failures: int | None = None
    connects: bool = False


RENEWS = ("claim", "worker")
"""What a queue may declare one heartbeat renews (`heartbeat_renews`)."""

CALLS = ("claim", "heartbeat", "complete", "fail")
"""The calls a worker makes on a job, as `held_calls` names them."""


def capabilities(queue: Queue) -> Capabilities:
    """Return what `queue` declares, with the defaults for what it leaves out."""
    connects = clients(queue) is not None
    if connects:
        said = [n for n in ("held_transactions", "transactional_effects", "held_calls")
                if getattr(queue, n, None)]  # fmt: skip
        if said:
            raise ContractError(
                f"{queue.name}: it opens its own connections (connect) and declares "
                f"{', '.join(said)}; the harness cannot hold a transaction open on them: "
                "declare held_transactions = False and transactional_effects = False"
            )
    held = bool(getattr(queue, "held_transactions", not connects))
    named = getattr(queue, "held_calls", None)
    held_calls = frozenset(CALLS if held else ()) if named is None else frozenset(named)
    max_failures = getattr(queue, "max_failures", None)
    if max_failures is not None and (
        isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 1
    ):
        raise ContractError(
            f"{queue.name}: max_failures is {max_failures!r}; declare a whole number of at "
            "least 1 (the failure reports that give a job up), or None for no such cap"
        )
    renews = getattr(queue, "heartbeat_renews", "claim")
    if renews not in RENEWS:
        raise ContractError(
            f"{queue.name}: heartbeat_renews is {renews!r}; declare 'claim' (a heartbeat "
            "renews the claim it names) or 'worker' (every claim its worker holds)"
        )
    unknown = sorted(held_calls - set(CALLS))
    if unknown:
        raise ContractError(
            f"{queue.name}: held_calls names {', '.join(unknown)}; "
            f"name only calls among {', '.join(CALLS)}"
        )
    return Capabilities(
        ordered_tokens=bool(getattr(queue, "ordered_tokens", False)),
        held_transactions=bool(held_calls),
        heartbeats=bool(getattr(queue, "heartbeats", True)),
        advance_clock=getattr(queue, "advance_clock", None),
        state=getattr(queue, "state", None),
        maintain=getattr(queue, "maintain", None),
        revokes_expired=bool(getattr(queue, "revokes_expired", False)),
        transactional_effects=bool(getattr(queue, "transactional_effects", not connects)),
        heartbeat_answers=bool(getattr(queue, "heartbeat_answers", True)),
        heartbeat_renews=renews,
        held_calls=held_calls,
        one_claim_per_worker=bool(getattr(queue, "one_claim_per_worker", False)),
        claim_many=getattr(queue, "claim_many", None),
        complete_many=getattr(queue, "complete_many", None),
        max_failures=max_failures,
        connects=connects,
    )


def not_checked(queue: Queue) -> list[str]:
    """Return, one line each, what the suite cannot check because of what `queue` declares."""
    caps = capabilities(queue)
    gaps = []
    if queue.max_attempts is None and caps.max_failures is None:
        gaps.append(f"retry-cap: {queue.name} promises no cap (max_attempts=None, no max_failures)")
    if not caps.heartbeats:
        gaps.append(
            f"heartbeats: {queue.name} has none; the heartbeat half of fencing "
            "and owner-progress is not exercised"
        )
    if caps.heartbeats and not caps.heartbeat_answers:
        gaps.append(
            f"heartbeat-answers: {queue.name}'s heartbeat answers nothing; it keeps the "
            "lease, but no heartbeat extends a judged lease or is judged by fencing, "
            "owner-progress or late-owner"
        )
    if caps.state is None:
        gaps.append(
            f"no-lost-jobs: {queue.name} has no state(); whether each job ends done or "
            "failed is not observed, a late owner refused at the cap is not judged, and "
            "neither are done-effect and no-hidden-claims (both read what state() shows)"
        )
    if caps.claim_many is None or caps.one_claim_per_worker:
        gaps.append(
            f"batches: {queue.name} claims one job per call; races inside a batch "
            "(claim_many / complete_many) are not explored"
        )
    elif caps.complete_many is None:
        gaps.append(
            f"batches: {queue.name} claims in batches (claim_many) and completes one job per "
            "call; races inside a batch completion (complete_many) are not explored"
        )
    if caps.revokes_expired:
        gaps.append(
            f"late-owner: {queue.name} declares revokes_expired; a late owner refused "
            "after its recovery is its design, said in the story but not judged"
        )
    if not caps.transactional_effects:
        gaps.append(
            f"atomic-rejection: {queue.name} runs the task's effect outside its completion; "
            "a rejected completion cannot take the effect back, and single-completion is "
            "judged from the completions it accepted"
        )
    if caps.held_transactions and caps.held_calls != frozenset(CALLS):
        outside = ", ".join(c for c in CALLS if c not in caps.held_calls)
        gaps.append(
            f"held-transactions: {queue.name} runs {outside} only outside a transaction the "
            "harness holds open; races of those calls inside one are not explored"
        )
    if caps.connects:
        gaps.append(
            f"lock-timeouts: {queue.name} opens its own connections; the harness cannot set "
            "lock_timeout on them, so calls ended by a lock timeout are not explored"
        )
    if not caps.held_transactions:
        gaps.append(
            f"held-transactions: {queue.name} cannot run inside a transaction the "
            "harness holds open; races between overlapping transactions are not explored"
        )
    return gaps


def missing_members(queue: object) -> list[str]:
    """Return the contract's required members `queue` lacks (none: it can be run)."""
    # A queue that declares it cannot extend a lease need not say so twice.
    needs = [m for m in REQUIRED if m != "heartbeat" or getattr(queue, "heartbeats", True)]
    return [m for m in needs if not hasattr(queue, m)]


class ContractError(ValueError):
    """The named queue is not usable as one; the message says what to fix."""


class HarnessFault(BaseException):
    """What carries a library's calls failed, not the library: a host process that
    exited under its clients, a bridge that broke. An adapter raises it (or its own
    subclass) in place of an answer; the run stops with no verdict, as it does for a call
    that never returns. A BaseException, so that neither the library's `except
    Exception` nor Hypothesis's search takes it for the queue's answer."""


def load(spec: str) -> Queue:
    """Return the queue that `module:attr` names (a class, a factory, or an instance)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ContractError(
            f"{spec!r} is not of the form module:attr "
            "(e.g. leasecheck.reference.queue:ReferenceQueue)"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ContractError(
            f"{spec!r}: no module named {exc.name!r}; check the spelling "
            "and that it is importable (installed, or on PYTHONPATH)"
        ) from None
    except Exception as exc:
        raise ContractError(
            f"{spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    try:
        target = getattr(module, attr)
    except AttributeError:
        raise ContractError(f"{spec!r}: module {module_name} has no attribute {attr!r}") from None
    queue: Any = target
    if inspect.isclass(target) or inspect.isfunction(target):
        try:
            queue = target()
        except ContractError as exc:
            raise ContractError(f"{spec!r}: {exc}") from None
        except Exception as exc:
            raise ContractError(
                f"{spec!r}: calling {attr}() failed: {type(exc).__name__}: {exc}; "
                "it must build the queue with no arguments"
            ) from None
    missing = missing_members(queue)
    if missing:
        raise ContractError(
            f"{spec!r} gives a {type(queue).__name__} without the contract's "
            f"members: {', '.join(missing)} (see leasecheck.stateful.contract)"
        )
    return queue  # type: ignore[no-any-return]
