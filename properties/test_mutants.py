"""Teeth: the machine must kill every mutant, on the property its docstring names.

Each run is derandomized with a fixed budget, so a mutant either dies here every
time or survives every time; a survivor is a failing test, not a note. Shrinking is
off (it changes nothing about which property broke and costs most of the time);
`test_naive_queue_shrinks_to_the_story` keeps it on for the story's own bug.

A property run plays the small scopes whole, then the search. A mutant dies here in the
search, but for the few `IN_A_SCOPE` names: the search reaches them late, and the scope
holding their short program kills them on every run, as it does in a property run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import Phase, settings

import mutants
from leasecheck import kit
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors, isolation
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.exhaustive import layer
from leasecheck.stateful.exhaustive.search import explore
from leasecheck.stateful.machine import Harness, LeaseMachine, Machine, machine_for
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.properties import PropertyViolated

# The last mutant to die in the search does so at example 146 of this derandomized
# sequence (recover-by-name, measured 2026-12-07, the machine drawing no module
# literals): 250 keeps a margin, and the reference and the subquery claims survive the
# same 250.
KILL = kit.budget(250)


IN_A_SCOPE = {"batch-by-worker": 2}
"""Mutants shown dead in a small scope (`layer.SCOPES` index), not the search: the
search met batch-by-worker at example 487 (a batch claimed, its worker asleep, its batch
completion fenced on the name), its scope in 36 schedules."""


@pytest.fixture
def pool(reference_pool: actors.Pool) -> actors.Pool:
    """Return a connection pool on the database with the reference schema."""
    return reference_pool


def _violated(queue: contract.Queue, pool: actors.Pool, budget: settings) -> PropertyViolated:
    harness = Harness(queue=queue, pool=pool)
    harness.reset()
    try:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=budget)
    except PropertyViolated as error:
        return error
    pytest.fail(f"mutant {queue.name} survived {budget.max_examples} examples")


def _violated_at(queue: contract.Queue, pool: actors.Pool, budget: settings) -> PropertyViolated:
    """`_violated` for a mutant only a held transaction's stricter level reaches: it names
    the level (`isolation`) and the property the reference itself breaks there
    (`excused`, see tests/test_faults.py)."""
    excused = frozenset(getattr(queue, "excused", ()))
    harness = Harness(queue=queue, pool=pool, excused=excused)
    harness.reset()
    drawn = machine_for("random", 0, queue.isolation)  # type: ignore[attr-defined]
    try:
        run_state_machine_as_test(lambda: drawn(harness), settings=budget)
    except PropertyViolated as error:
        return error
    pytest.fail(f"mutant {queue.name} survived {budget.max_examples} examples")


def _violated_in_scope(queue: contract.Queue, pool: actors.Pool, index: int) -> PropertyViolated:
    """`_violated` in small scope `index`, searched as a property run searches it."""
    harness = Harness(queue=queue, pool=pool)
    scope, schedules = layer.SCOPES[index]
    done = explore(harness, scope, None, schedules=schedules)
    if done.violation is None:
        pytest.fail(f"mutant {queue.name} survived {scope.where()}")
    return done.violation


@pytest.mark.parametrize("name", sorted(mutants.ALL))
def test_mutant_is_killed_on_its_property(name: str, pool: actors.Pool) -> None:
    """The machine rejects the mutant, on the property (or neighbour) its docstring names."""
    queue = contract.load(mutants.ALL[name])
    isolated = getattr(queue, "isolation", isolation.DEFAULT) != isolation.DEFAULT
    if name in IN_A_SCOPE:
        error = _violated_in_scope(queue, pool, IN_A_SCOPE[name])
    else:
        error = (_violated_at if isolated else _violated)(queue, pool, KILL)
    # `expected` is the mutants' own declaration, which contract.Queue does not list.
    expected = queue.expected  # type: ignore[attr-defined]
    assert error.violation.prop in expected, f"{name} died on {error.violation}, not {expected}"


def test_reference_survives_the_kill_budget(pool: actors.Pool) -> None:
    """The reference queue passes the very budget that kills every mutant."""
    harness = Harness(queue=contract.load("leasecheck.reference.queue:ReferenceQueue"), pool=pool)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=KILL)


@pytest.mark.parametrize("name", ["in-subquery-claim", "from-subquery-claim"])
def test_only_the_replan_move_kills_the_subquery_claims(name: str, pool: actors.Pool) -> None:
    """Each dies above; with the `replan` move not offered (a server whose plans never
    change), it survives the very same budget: only that move reaches it."""
    queue = contract.load(mutants.ALL[name])
    harness = Harness(queue=queue, pool=pool, replans=False)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=KILL)


def test_reference_survives_the_kill_budget_at_drawn_isolation(pool: actors.Pool) -> None:
    """Held transactions at drawn levels: the reference keeps every property but
    owner-progress and late-owner, which it breaks there: a completion in a snapshot
    older than its own heartbeat's renewal raises 40001, whether the owner's lease still
    runs or has just run out (tests/test_faults.py shows how)."""
    queue = contract.load("leasecheck.reference.queue:ReferenceQueue")
    excused = frozenset({"owner-progress", "late-owner"})
    harness = Harness(queue=queue, pool=pool, excused=excused)
    harness.reset()
    drawn = machine_for("random", 0, "drawn")
    run_state_machine_as_test(lambda: drawn(harness), settings=KILL)


def test_naive_queue_shrinks_to_the_story(pool: actors.Pool) -> None:
    """Shrunk, the naive queue's failure is the story, in at most 7 steps: a worker
    claims, sleeps past its lease while another reclaims, wakes and completes too."""
    shrink = settings(KILL, phases=(Phase.generate, Phase.shrink))
    error = _violated(contract.load(mutants.ALL["naive"]), pool, shrink)
    assert error.violation.prop == "single-completion"
    assert "completed 2 times" in str(error)
    steps = program(error)
    assert steps[0].startswith("state.start("), steps
    assert any(s.startswith("state.asleep(") for s in steps), steps
    assert len(steps) <= 7, "\n".join(steps)


def program(error: BaseException) -> list[str]:
    """Return the rule calls of the program Hypothesis reports for a failure."""
    notes = "\n".join(getattr(error, "__notes__", []))
    calls = [line for line in notes.splitlines() if line.startswith("state.")]
    judged = ("state.every_property_holds()", "state.teardown()")
    assert calls, f"no program in the failure report:\n{notes}"
    return [c for c in calls if c not in judged]


def _river_1302(machine: Machine) -> None:
    """The River #1302 race as rule calls: the owner's late completion commits while a
    reaper (the queue's own recovery sweep) that selected the expired job waits on its
    row lock."""
    play = machine.play
    steps: list[Callable[[], object]] = [
        lambda: play("start", workers=2),
        lambda: play("claim", how=Take(worker=0, held=False)),
        lambda: play("asleep", how=Stall(worker=0, alone=True, then="nothing")),
        lambda: play("open_transaction", pick=0),
        lambda: play("complete", pick=0),
        # the reaper blocks here (a queue without one: another worker's claim instead)
        lambda: (
            play("sweep", after="now")
            if machine.caps.maintain
            else play("claim", how=Take(worker=1, held=False))
        ),
        lambda: play("close_transaction", pick=0, commit=True),
    ]
    try:
        for step in steps:
            step()
            machine.every_property_holds()
        machine.teardown()
    except BaseException:
        machine.d.core.clean_up()
        raise


@pytest.mark.parametrize(
    ("spec", "caught"),
    [
        ("mutants.reaper_by_id:ReaperById", True),
        ("leasecheck.reference.queue:ReferenceQueue", False),
    ],
    ids=["reaper-by-id", "reference"],
)
def test_the_reaper_race_is_reachable(spec: str, caught: bool, pool: actors.Pool) -> None:
    """The machine's own rules reach River #1302's race, and the oracle names it; the
    reference queue, driven through the very same steps, keeps every property."""
    harness = Harness(queue=contract.load(spec), pool=pool)
    harness.reset()
    machine = LeaseMachine(harness)
    if not caught:
        _river_1302(machine)
        return
    with pytest.raises(PropertyViolated) as error:
        _river_1302(machine)
    assert error.value.violation.prop in ("single-completion", "no-lost-jobs", "fencing")


def test_an_excused_property_is_not_judged_and_the_others_still_are(pool: actors.Pool) -> None:
    """`--leasecheck-excuse single-completion` on the naive queue: its stale completion is still
    caught, by the next property that sees it (the matrix relies on exactly this)."""
    naive = contract.load(mutants.ALL["naive"])
    harness = Harness(queue=naive, pool=pool, excused=frozenset({"single-completion"}))
    harness.reset()
    with pytest.raises(PropertyViolated) as error:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=KILL)
    assert error.value.violation.prop != "single-completion"
    assert error.value.violation.prop in ("fencing", "no-lost-jobs"), error.value.violation
