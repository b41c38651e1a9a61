"""leasecheck's property tests, to run in a queue's own repository.

One file adopts them, e.g. `tests/test_leasecheck.py`:

    from leasecheck.suite import *  # noqa: F403

with the queue named once, in `pyproject.toml`:

    [tool.pytest.ini_options]
    leasecheck_queue = "myqueue.queue:Queue"

Then `pytest -n auto` runs the properties beside the queue's own tests. Only these
tests run, never leasecheck's own. `pytest --pyargs leasecheck.suite` runs them
without a file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import seed, settings
from hypothesis.errors import Flaky

from leasecheck.stateful import opening
from leasecheck.stateful.contract import ContractError, HarnessFault
from leasecheck.stateful.engine import actors, memory
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.engine.shrinking import ShrinkSpent
from leasecheck.stateful.exhaustive import layer
from leasecheck.stateful.machine import Harness, Machine, machine_for
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.stateful.story import confirm, minimize, replay
from leasecheck.stateful.story.minimize import Minimized
from leasecheck.wing import exercised
from leasecheck.wing.shards import Shard

__all__ = [
    "test_leasecheck_properties",
    "test_leasecheck_regression",
    "test_leasecheck_what_is_not_checked",
]


def test_leasecheck_properties(
    leasecheck_harness: Harness,
    leasecheck_shard: Shard,
    leasecheck_budget: settings,
    leasecheck_out: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Simulated workers race over leased jobs; every property holds after every step.

    The shard plays its share of the opening's fixed stories (`stateful.opening`) and
    searches its share of the small scopes whole (`stateful.exhaustive.layer`), then
    Hypothesis searches. What the examples exercised is recorded with the report, pass
    or fail, for the run's summary of what each property was put to.
    """

    schedule = machine_for(
        leasecheck_harness.schedule, leasecheck_shard.index, leasecheck_harness.isolation
    )

    def machine() -> Machine:
        return schedule(leasecheck_harness)

    if leasecheck_budget.derandomize:
        machine = seed(leasecheck_shard.seed)(machine)
    budget = leasecheck_shard.budget(leasecheck_budget)

    def run() -> None:
        with memory.bounded():
            if leasecheck_harness.opens:
                index, count = leasecheck_shard.index, leasecheck_shard.count
                opening.play(leasecheck_harness, index, count)
                searched = layer.play(leasecheck_harness, index, count)
                leasecheck_harness.searched += [s.as_dict() for s in searched]
            run_state_machine_as_test(machine, settings=budget)

    try:
        _reporting_failures(leasecheck_harness, leasecheck_out, run)
    finally:
        # Not the record_property fixture: it warns under junit_family=xunit2, and a
        # queue's CI that writes JUnit XML with warnings as errors would fail on it.
        request.node.user_properties.append((exercised.KEY, dict(leasecheck_harness.coverage)))
        request.node.user_properties.append((exercised.OPENING, leasecheck_harness.played))
        request.node.user_properties.append((exercised.SEARCHED, leasecheck_harness.searched))


def test_leasecheck_what_is_not_checked(leasecheck_gap: str) -> None:
    """Each property (or part) the queue's declarations rule out is reported, never passed."""
    pytest.skip(leasecheck_gap)


def test_leasecheck_regression(
    leasecheck_harness: Harness, leasecheck_regression: Path | None
) -> None:
    """A committed failure file replays step by step, and every property holds (but
    those the run that found it excused, as it judged them)."""
    if leasecheck_regression is None:
        pytest.skip(
            "no failure files to replay: commit some and name their directory with "
            "--leasecheck-regressions DIR or leasecheck_regressions in the pytest config"
        )
    try:
        saved = replay.load(leasecheck_regression)
    except ValueError as exc:
        pytest.fail(f"leasecheck: {exc}", pytrace=False)
    excused = leasecheck_harness.excused
    leasecheck_harness.excused = excused | saved.excused
    try:
        replay.replay(leasecheck_harness, saved.steps)
    finally:
        leasecheck_harness.excused = excused


def _reporting_failures(harness: Harness, out: Path, run: Callable[[], None]) -> None:
    """Run the machine; on a broken property, write its files and fail with the story, once.

    The report is the violation, its timeline, the program (Hypothesis's shrunk one,
    with the steps its failure does not need deleted: `stateful.story.minimize`) and how to
    replay it; the traceback through the harness would only repeat it. A search stopped by
    the shrink budget tells the newest failing program of the property it was shrinking.
    """
    broken: list[tuple[str | None, BaseException | None]] = []
    apart: str | None = None
    spent: int | None = None
    try:
        _unless_met(run)
        return
    except ContractError as error:
        # Not a verdict: nothing the queue did can be judged. The story is how it got there.
        unusable: str | None = "\n".join(_contract_story(harness, error))
    except actors.CallHung as error:
        # Nor is a call that never answers: no run of it can go on.
        unusable = str(error)
    except HarnessFault as error:
        # Nor a call whose carrier failed (a client's host process died): not the queue's.
        pytest.fail(f"leasecheck: no verdict: {error}", pytrace=False)
    except Flaky as error:
        # Not a verdict either: one program ran twice and was answered differently.
        unusable, apart = None, _replayed_apart(error, harness.recorder.stories.parted())
    except ShrinkSpent as error:
        spent, unusable = error.limit, None
        broken = [(_shrunk_alone(harness), None)]
    except (PropertyViolated, BaseExceptionGroup) as error:
        violations = _violations(error)
        if violations is None:
            raise
        broken, unusable = [(_prop(e), e) for e in violations], None
    if unusable is not None:
        pytest.fail(f"leasecheck: contract error: {unusable}", pytrace=False)
    if apart is not None:
        pytest.fail(apart, pytrace=False)
    shorter = {m.prop: m for m in minimize.minimize_all(harness) if m.after < m.before}
    stories: dict[str, tuple[str, ...]] = {}
    gone = confirm.unconfirmed(harness, stories)
    lines = [line for p, e in broken for line in _told(harness, p, e, shorter, stories, spent)]
    written = harness.recorder.write(out, harness.queue.name, harness.spec, harness.excused)
    for path in (p for p in written if p.suffix == ".json"):
        lines += [f"leasecheck: saved {path} (and .txt, .svg beside it)"]
        lines += [f"leasecheck: replay it with: leasecheck replay {path}"]
    if gone:
        lines = [
            f"leasecheck: NOT A VERDICT: {', '.join(gone)} broke in the search but held when "
            "its program was replayed on fresh sessions; something outside the program (state "
            "left on a connection, timing) decided it. The story and files follow.",
            *lines,
        ]
    pytest.fail("\n".join(lines), pytrace=False)  # outside `except`: no chained traceback


def _unless_met(run: Callable[[], None]) -> None:
    """Run `run`; if the shrink budget stopped it after meeting an error other than a
    property's failure, raise that error instead: a contract error makes the run
    unusable and an error of the harness is ours, and neither may hide behind a verdict."""
    try:
        run()
    except ShrinkSpent as spent:
        if spent.met is None:
            raise
        raise spent.met from None


def _shrunk_alone(harness: Harness) -> str:
    """Keep, of the failures the recorder holds when the shrink budget is spent, only the
    shard's first (the one it was shrinking), as a shard tells one failure; return its
    property. Others met while shrinking show in other shards, or once it is fixed."""
    first = next(iter(harness.recorder.last))
    harness.recorder.last = {first: harness.recorder.last[first]}
    return first


def _prop(error: BaseException) -> str | None:
    return error.violation.prop if isinstance(error, PropertyViolated) else None


def _budget(spent: int | None) -> str:
    """Say, after "Hypothesis shrank it", how far it went when the shrink budget stopped it."""
    if spent is None:
        return ""
    return f" in the {spent} examples the shrink budget allows (--leasecheck-shrink full goes on)"


def _replayed_apart(error: Flaky, parted: str | None = None) -> str:
    """Say, in one line, that Hypothesis ran one program twice and it was answered
    differently, and where the two runs parted when their stories show it: nothing is
    judged on answers the program does not decide, and the cause may be the queue's or
    the run's, so neither is blamed."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    where = f"; {parted}" if parted else ""
    return (
        "leasecheck: NOT A VERDICT: the same program met different answers when it ran again "
        f"(Hypothesis: {type(error).__name__}: {first}), so no property was judged on it"
        f"{where}. "
        "Something besides the program decided them: in the queue, ties in an ORDER BY "
        "broken by random ids (UUIDs from random bits, as uuidv7 fallbacks before "
        "PostgreSQL 18 make them), random() or the real clock; or in the run, timing the "
        "harness did not hold still. A total order (a sequence or the enqueue time, then "
        "the id) makes a queue's answers the program's"
    )


def _contract_story(harness: Harness, error: ContractError) -> list[str]:
    """Return the lines that tell how the queue came to break the contract: what it
    answered, the timeline, and the program, in a violation's form (Hypothesis's notes
    only if the example left no story)."""
    if harness.broke_contract is None:
        return [str(error), *getattr(error, "__notes__", ())]
    timeline, program = harness.broke_contract
    return [
        str(error),
        timeline,
        f"Failing program, {len(program)} steps (as Hypothesis shrank it):",
        *(str(step) for step in program),
    ]


def _told(
    harness: Harness,
    prop: str | None,
    error: BaseException | None,
    shorter: dict[str, Minimized],
    stories: dict[str, tuple[str, ...]],
    spent: int | None,
) -> list[str]:
    """Return the lines that tell one broken property: the verdict, its timeline, and the
    program step by step as its confirming replay told it (or, when deleting steps found
    a shorter one, the shorter program's). Hypothesis's own notes only for a failure that
    neither replay told (one that did not come back on fresh sessions); the recorded
    program when there are none (the shrink budget stopped Hypothesis before its own
    replay). `spent` is the shrink budget that stopped Hypothesis, if one did."""
    if prop is None or (prop not in shorter and prop not in stories and error is not None):
        return [str(error), *getattr(error, "__notes__", ())]
    found = _opening_said(harness.opening)
    failure = harness.recorder.last[prop]
    verdict = f"{failure.violation}\n{failure.timeline}"
    if prop not in shorter:
        steps = stories.get(prop) or tuple(str(step) for step in failure.program)
        shrank = found or f"as Hypothesis shrank it{_budget(spent)}"
        return [
            verdict,
            f"Failing program, {len(failure.program)} steps ({shrank}; no step could be deleted):",
            *steps,
        ]
    done = shorter[prop]
    cut = done.before - done.after
    had = (
        f"{found} had {done.before}; {cut} deleted"
        if found
        else f"Hypothesis shrank it to {done.before}{_budget(spent)}; {cut} more deleted"
    )
    return [
        verdict,
        f"Failing program, {done.after} steps ({had}, in {done.replays} replays, as steps "
        "the failure does not need):",
        *done.story,
    ]


def _opening_said(opening: str | None) -> str | None:
    """Say which part of the opening found a failure: a story, or a small scope."""
    if opening is None:
        return None
    if opening.startswith("small scope"):
        return f"the opening's {opening}, breadth first"
    return f"the opening's story {opening!r}"


def _violations(error: BaseException) -> list[BaseException] | None:
    """Return the broken properties `error` carries, or None if it is anything else."""
    if isinstance(error, PropertyViolated):
        return [error]
    if isinstance(error, Flaky):
        return None  # not a verdict on the queue: the same program did not replay alike
    if isinstance(error, BaseExceptionGroup):
        found = [_violations(e) for e in error.exceptions]
        if all(f is not None for f in found):
            return [e for f in found if f is not None for e in f]
    return None
