"""The small scopes every property run searches whole before Hypothesis samples.

Random search reaches a short program with some probability, and which short bugs a
derandomized `ci` run reaches moved whenever a move was added. A small scope searched
whole reaches every one of its programs on every run: a queue that fails on its third
failure report, or whose claim commits before a statement that times out, dies here
by construction, with its shortest counterexample. Each scope names its moves, so
"searched whole" says exactly which programs were tried; its budget is counted in
schedules, so a run covers the same programs on any machine.

The scopes are split into units, and shard i of n searches every n-th unit, so the
shards of a run search each unit once between them; the run's closing lines say
which scopes were searched whole (`Searched`), and to what depth a cut-short one was.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from leasecheck.stateful.exhaustive.scope import Scope
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.harness import Harness


def _scope(
    workers: int,
    jobs: int,
    moves: int,
    preemptions: int,
    rules: str,
    times: str = "beat",
    *,
    held_claims: bool = True,
) -> Scope:
    return Scope(
        workers, jobs, moves, preemptions, frozenset(rules.split()), tuple(times.split()),
        held_claims,
    )  # fmt: skip


EDGES = "before-lease-end before-lease-end-ms before-lease-end-s past-lease-end"
"""Where the seventh scope's clock lands: just before a lease end at each resolution
queues store, and just past it."""

SCOPES: tuple[tuple[Scope, int], ...] = (
    # One worker's life with one job, deep: attempts used up by failures and crashes, the
    # queue's own recovery between them (a failure on the last attempt, a retry cap).
    (_scope(1, 1, 6, 0, "claim complete fail crash sweep"), 400),
    # One worker's call paused between its statements: a completion whose effect commits
    # apart, a heartbeat racing its own worker's completion, a crash in between.
    (
        _scope(1, 1, 4, 1, "claim complete fail heartbeat preempt resume_call crash time_passes"),
        1500,
    ),
    # Two workers, one job, the takeovers: a sleeper's lease runs out (or runs a whole
    # lease past), another claims, the sleeper wakes and reports; a worker restarted
    # under its old name; a claim paused between its statements while the owner it
    # takes from renews (a claim that locks one row and grants on another).
    (
        _scope(
            2, 1, 3, 1, "claim asleep complete fail heartbeat restart crash preempt resume_call"
        ),
        2500,
    ),
    # Two workers, two jobs, a transaction held open: a claim that waits on a row lock,
    # or times out after its own UPDATE committed.
    (_scope(2, 2, 3, 0, "claim time_out complete fail close_transaction"), 600),
    # Two workers, two jobs, in batches: a batch claimed, its worker asleep, its batch
    # completion mixing stale and fresh claims.
    (_scope(2, 2, 2, 0, "claim_batch asleep complete_batch"), 300),
    # One worker and its own expired job: it sleeps past its lease, its loop claims the
    # job again, and the stale claim's heartbeat (or the new one's) is judged: a fence on
    # the worker's name, not the attempt, lets the stale one renew. Its claims commit at
    # once (a claim held open is the fourth scope's).
    (_scope(1, 1, 4, 0, "claim asleep heartbeat", held_claims=False), 1000),
    # A lease's edge: a claim, its owner stopped (a live one renews on time), then the
    # clock lands just before the lease end at each resolution queues store (a
    # microsecond, a millisecond, a second), or just past it, and the other worker
    # claims: a reclaim a moment early, a lease stored rounded down to the second.
    (_scope(2, 1, 4, 0, "claim pause time_passes", EDGES, held_claims=False), 500),
    # The planner's turn: the tables analyzed while tiny, then grown, then claims. A claim
    # that picks its job in a subquery runs the pick once per row under the new plan and
    # takes several jobs for one it hands out. Needs a server that can put statistics
    # back (PostgreSQL 18); elsewhere it is not searched, and the closing line says so.
    (_scope(1, 1, 3, 0, "replan claim", held_claims=False), 100),
)
"""Each scope and its budget in schedules under `dev` and `ci` (`deep` gives each ten
times as many): the reference searches each whole within it (3,964 schedules in all).
Shard i of n takes every n-th scope, and `--leasecheck-shard 1/2` every other shard: the
two costliest (the second and third, 954 and 1,507 schedules on the reference) stand
apart so that a run split over two machines splits them too.
A queue whose random ids keep every state apart may spend a budget first, and is told
how deep each scope went."""


@dataclass(frozen=True)
class Searched:
    """What one shard's search of one scope came to, as the run's report carries it."""

    scope: str
    depth: int
    moves: int
    complete: bool
    schedules: int
    states: int
    hint: str = ""
    """Why it was cut short early, when the queue's reset is the cause (`Outcome.hint`)."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def play(harness: Harness, index: int = 0, count: int = 1) -> list[Searched]:
    """Search shard `index` of `count`'s share of the scopes (every count-th, so the shards
    of a run search each once between them); return what each search came to.

    A scope that holds a counterexample raises its PropertyViolated (its shortest, since
    the search is breadth first), with `harness.opening` naming the scope."""
    out = []
    for scope, schedules in SCOPES[index::count]:
        if "replan" in scope.rules and not harness.can_replan():
            why = "replans need a server that can put statistics back: PostgreSQL 18 or later"
            out.append(Searched(scope.where(), 0, scope.moves, False, 0, 0, why))
            continue
        harness.opening = f"small scope searched whole: {scope.where()}"
        done = explore(harness, scope, None, schedules=schedules * harness.searches)
        if done.violation is not None:
            raise done.violation
        out.append(
            Searched(
                scope=scope.where(),
                depth=done.depth,
                moves=scope.moves,
                complete=done.complete,
                schedules=done.schedules,
                states=done.states,
                hint=done.hint(),
            )
        )
    harness.opening = None
    return out


def said(searched: list[dict[str, object]]) -> list[str]:
    """Return the closing lines: each scope searched whole, or how deep it was cut."""
    lines = []
    for s in searched:
        scope, depth, moves = str(s["scope"]), int(str(s["depth"])), int(str(s["moves"]))
        if not s["schedules"] and not s["complete"]:
            lines.append(f"not searched ({s.get('hint', '')}): {scope}")
        elif not s["schedules"]:
            lines.append(f"nothing to search (the queue offers none of its moves): {scope}")
        elif s["complete"]:
            lines.append(f"no violation in: {scope}")
        else:
            lines.append(
                f"searched whole only to {depth} of {moves} moves (budget spent): {scope}"
                f"{s.get('hint', '')}"
            )
    return lines
