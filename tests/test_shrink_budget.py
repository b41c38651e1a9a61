"""The shrink budget (`--leasecheck-shrink`): a failing run stops shrinking after N
examples and tells the smallest failure found so far, confirmed, saying it was cut.

The real runs are a seeded shard of the naive mutant with the opening off (its first
story breaks naive, and a story needs no shrinking), once with a budget of 0 and once with
the full one: only the first says it was cut, and both tell a confirmed story.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import mutants
from leasecheck import cli, suite
from leasecheck.stateful import contract
from leasecheck.stateful.contract import ContractError
from leasecheck.stateful.engine import actors, profiles
from leasecheck.stateful.engine.shrinking import Budget, ShrinkSpent
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import PropertyViolated, Violation
from leasecheck.stateful.story import replay
from leasecheck.wing import options
from tests import child

NAIVE = "mutants.naive:Naive"


@pytest.mark.parametrize(
    ("value", "profile", "budget"),
    [("profile", "dev", 25), ("profile", "ci", 25), ("profile", "deep", None),
     ("full", "ci", None), ("7", "dev", 7), ("0", "deep", 0)],
)  # fmt: skip
def test_the_budget_is_the_profiles_unless_given(
    value: str, profile: str, budget: int | None
) -> None:
    assert options._shrink_budget(value) == value
    assert profiles.shrinks(value, profile) == budget


@pytest.mark.parametrize("value", ["x", "-3", "2.5", ""])
def test_a_bad_budget_says_what_to_give(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="give a count of examples"):
        options._shrink_budget(value)
    with pytest.raises(SystemExit) as done:
        cli.main(["check", NAIVE, "--leasecheck-shrink", value])
    assert done.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    said = f"{value!r} is not a shrink budget: give a count of examples (e.g. 25), or full"
    assert error.endswith(said), error


def _check(tmp_path: Path, dsn: str, budget: str) -> tuple[child.Finished, Path]:
    out = tmp_path / f"failures-{budget}"
    done = child.run(
        [
            str(Path(sys.executable).with_name("leasecheck")),
            "check", NAIVE, "-n", "0", "--leasecheck-shards", "8", "--leasecheck-shard", "1/8",
            "--pg-dsn", dsn, f"--leasecheck-dir={out}", "--leasecheck-opening=off",
            f"--leasecheck-shrink={budget}", "--", "--hypothesis-seed=2", "-k", "properties",
        ],
        tmp_path / "tmp",
        timeout=300,
    )  # fmt: skip
    return done, out


@pytest.mark.slow
def test_a_spent_budget_tells_a_confirmed_story_that_says_it_was_cut(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    cut, out = _check(tmp_path, leasecheck_server_dsn, "0")
    assert cut.returncode == 1, cut.output
    assert cut.output.count("[single-completion] job1 completed 2 times\n") == 1, cut.output
    cut_short = "in the 0 examples the shrink budget allows (--leasecheck-shrink full goes on)"
    assert cut_short in cut.output, cut.output
    assert "NOT A VERDICT" not in cut.output and "Traceback" not in cut.output, cut.output
    (saved,) = out.glob("naive-single-completion-*.json")
    assert json.loads(saved.read_text())["property"] == "single-completion"

    full, _ = _check(tmp_path, leasecheck_server_dsn, "full")
    assert full.returncode == 1, full.output
    assert "[single-completion] job1 completed 2 times\n" in full.output
    assert "shrink budget" not in full.output, full.output


SINGLE = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
]
"""Naive's double completion: w1 sleeps past its lease twice, w2 takes the job each time."""

STALE = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete", rival="commits")}),
]
"""Naive's stale completion: the sleeper completes the job its rival took (and the
drain completes it again)."""


def test_a_spent_budget_tells_the_shards_first_failure_alone(
    reference_pool: actors.Pool, tmp_path: Path
) -> None:
    """A failure of another property met while shrinking is neither told nor saved: a
    shard tells its first failure, as it does when Hypothesis ends the shrink."""
    harness = Harness(queue=contract.load(mutants.ALL["naive"]), pool=reference_pool)
    harness.reset()
    met = []
    for program, excused in ((SINGLE, ()), (STALE, ("single-completion",))):
        harness.excused = frozenset(excused)  # STALE completes twice too
        with pytest.raises(PropertyViolated) as broke:
            replay.replay(harness, program)
        met.append(broke.value.violation.prop)
    assert met == ["single-completion", "fencing"] and list(harness.recorder.last) == met
    harness.excused = frozenset()

    def spent() -> None:
        raise ShrinkSpent(3, None)

    with pytest.raises(pytest.fail.Exception) as failed:
        suite._reporting_failures(harness, tmp_path, spent)
    story = str(failed.value.msg)
    assert story.startswith("[single-completion] job1 completed 2 times"), story
    assert "[fencing]" not in story and "in the 3 examples the shrink budget allows" in story
    assert [p.name.split("-")[1] for p in tmp_path.glob("*.json")] == ["single"], story


def _search(budget: Budget, ends: list[BaseException | None]) -> None:
    """Run a Hypothesis search whose examples end, in turn, as `ends` says, each after
    one recorded failure (as the harness counts them), until the budget stops it."""

    @settings(database=None, max_examples=len(ends), phases=[Phase.generate])
    @given(st.integers())
    def search(_: int) -> None:
        budget.count(failing=True)
        budget.end(ends[budget.run - 1])

    search()


def test_the_budget_stops_the_search_past_its_limit_and_not_before() -> None:
    budget = Budget(limit=2)
    with pytest.raises(ShrinkSpent) as stopped:
        _search(budget, [None] * 10)
    assert (budget.run, stopped.value.limit, stopped.value.met) == (3, 2, None)
    budget = Budget(limit=None)
    _search(budget, [None] * 10)  # Hypothesis's own bound: never stopped
    assert budget.run == 10


def test_an_error_met_while_shrinking_is_kept_and_raised_instead_of_the_verdict(
    reference_pool: actors.Pool, tmp_path: Path
) -> None:
    """A contract error (or an error of the harness) that an example of the shrink ended
    with is not lost behind the failure told: the budget keeps the first (a property's
    failure is not one), and the suite raises it, as it raises one Hypothesis reports."""
    broke = ContractError("claim() returned 'x', not a Claim or None")
    budget = Budget(limit=2)
    fencing = PropertyViolated(Violation("fencing", "a stale completion was accepted"))
    with pytest.raises(ShrinkSpent) as stopped:
        _search(budget, [broke, fencing, None, None])
    assert stopped.value.met is broke

    harness = Harness(queue=contract.load(mutants.ALL["naive"]), pool=reference_pool)
    harness.reset()

    def spent() -> None:
        raise stopped.value

    with pytest.raises(pytest.fail.Exception) as failed:
        suite._reporting_failures(harness, tmp_path, spent)
    assert str(failed.value.msg).startswith("leasecheck: contract error: claim() returned 'x'")
