"""Programs and shards are plain data: they round-trip, hash stably and reject bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leasecheck.stateful import program
from leasecheck.stateful.moves import Stall, Take
from leasecheck.stateful.program import Step
from leasecheck.stateful.story import replay
from leasecheck.wing import shards

STEPS = [
    Step("start", {"workers": 2}),
    Step("claim", {"how": Take(worker=0, held=False)}),
    Step("asleep", {"how": Stall(worker=0, alone=False, then="complete")}),
    Step("close_transaction", {"pick": 1, "commit": True}),
]


def test_a_program_survives_json() -> None:
    """Rule arguments, composite ones included, come back as the rule received them."""
    text = json.dumps(program.to_json(STEPS))
    assert program.from_json(json.loads(text)) == STEPS


def test_the_digest_names_the_program_not_the_run() -> None:
    """Equal programs hash alike, and a different argument changes the hash."""
    other = [*STEPS[:-1], Step("close_transaction", {"pick": 1, "commit": False})]
    assert program.digest(STEPS) == program.digest(list(STEPS))
    assert program.digest(STEPS) != program.digest(other)
    assert len(program.digest(STEPS)) == 8


def test_a_step_prints_as_the_rule_call() -> None:
    """A step reads like the line Hypothesis prints for it."""
    assert str(STEPS[1]) == "state.claim(how=Take(worker=0, held=False))"


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"history": []}, "not a leasecheck failure file with a program"),
        ({"format": 99, "program": []}, "program format 99"),
        ({"format": program.FORMAT, "program": [{"rule": "claim"}]},
         "program step 1 is malformed: 'args' missing"),
        ({"format": program.FORMAT, "program": [{"rule": "x", "args": {"a": {"Q": {}}}}]},
         r'\{"Q": \{\}\} is no argument: write a type \(Take, Stall\) and its fields'),
        ({"format": program.FORMAT, "program": [
            {"rule": "start", "args": {"workers": 2}},
            {"rule": "claim", "args": {"how": {"worker": 0, "held": False}}}]},
         "program step 2 is malformed: .* is no argument: .*e.g. "),
        ({"format": program.FORMAT, "program": [
            {"rule": "claim", "args": {"how": {"Take": {"worker": 0, "hold": False}}}}]},
         "Take takes the fields worker, held, got"),
    ],
)  # fmt: skip
def test_a_bad_failure_file_is_one_line(tmp_path: Path, data: object, fragment: str) -> None:
    """Each way a file can fail to be a program says so in one line."""
    path = tmp_path / "f.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=fragment) as caught:
        replay.load(path)
    assert "\n" not in str(caught.value)


def test_shards_split_the_examples_and_seeds() -> None:
    """Every shard gets its own seed and a share of the examples; together at least all."""
    from hypothesis import settings

    chosen = shards.select(8, None)
    assert len({s.seed for s in chosen}) == 8
    assert sum(s.budget(settings(max_examples=300)).max_examples for s in chosen) >= 300


def test_machines_of_a_matrix_take_disjoint_shards() -> None:
    """`--leasecheck-shard I/N` over I = 1..N covers every shard exactly once."""
    parts = [shards.select(8, (i, 3)) for i in (1, 2, 3)]
    ids = [s.index for part in parts for s in part]
    assert sorted(ids) == list(range(8))


@pytest.mark.parametrize(
    ("text", "count", "fragment"),
    [("3", 8, "write I/N"), ("0/4", 8, "write I/N"), ("5/4", 8, "write I/N"),
     ("2/9", 8, "more machines than shards")],
)  # fmt: skip
def test_a_bad_shard_is_one_line(text: str, count: int, fragment: str) -> None:
    """A malformed or impossible slice names the form to write."""
    with pytest.raises(shards.ShardError, match=fragment):
        shards.select(count, shards.parse_slice(text))
