"""The table of moves (`stateful.rules`) is what every machine, the explorer and the
opening read: no machine variant has a rule the table lacks or lacks one it has, and
no story plays a move the table does not hold, with arguments its move does not take."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis.stateful import INITIALIZE_RULE_MARKER, RULE_MARKER

from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract, opening
from leasecheck.stateful.engine import isolation
from leasecheck.stateful.machine import REPLAYER, build
from leasecheck.stateful.rules import BY_NAME, RULES, Variant
from leasecheck.stateful.story import replay


def _rules(machine: type) -> dict[str, dict[str, str]]:
    """Return each rule of `machine` with what it draws, as Hypothesis sees them."""
    out = {}
    for name in dir(machine):
        member = getattr(machine, name)
        rule = getattr(member, RULE_MARKER, None) or getattr(member, INITIALIZE_RULE_MARKER, None)
        if rule is not None:
            out[name] = {arg: repr(s) for arg, s in rule.arguments.items()}
    return out


@pytest.mark.parametrize("schedule", ["random", "pct"])
@pytest.mark.parametrize("mode", [isolation.DEFAULT, "serializable", "drawn"])
def test_each_machine_has_the_tables_rules_for_its_variant(schedule: str, mode: str) -> None:
    variant = Variant(schedule, mode)
    want = {
        m.name: {arg: repr(s) for arg, s in m.arguments(variant).items()}
        for m in RULES
        if m.present(variant)
    }
    assert _rules(build(schedule, mode)) == want
    held = {"claim", "open_transaction", "work_in_transaction"} & set(want)
    assert all(("level" in want[r]) == (mode != isolation.DEFAULT) for r in held)
    assert ("order" in want["start"]) == (schedule == "pct")


def test_a_variant_is_built_once() -> None:
    assert build("pct", "drawn") is build("pct", "drawn")
    assert build("pct") is not build("random")


def test_every_story_of_the_opening_plays_moves_of_the_table() -> None:
    """With every capability declared, so that every story is told."""
    queue = ReferenceQueue()
    caps = dataclasses.replace(
        contract.capabilities(queue),
        claim_many=queue.claim_many,
        complete_many=queue.complete_many,
        max_failures=2,
    )
    stories = opening.stories(caps, 3)
    assert len(stories) > 20
    for story in stories:
        assert {s.rule for s in story.steps} <= set(BY_NAME), story.name
        replay.check(list(story.steps))  # each step's arguments bind to its move


def test_the_replayer_takes_every_move() -> None:
    assert set(_rules(REPLAYER)) == set(BY_NAME)
