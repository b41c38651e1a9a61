"""A run of the machine as data: the rule calls, in order, with plain arguments.

A failing example is saved as its program, not only as the history it produced
and not as Hypothesis's opaque blob, so that it replays step by step against any
queue, without Hypothesis's search and across Hypothesis versions. This module
knows the shape of a program and how to write and read it; `stateful.story.replay` runs
one.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from leasecheck.stateful.moves import Stall, Take

FORMAT = 1
"""Bumped when a saved program could no longer replay as it was recorded."""

_ARGUMENT_TYPES: dict[str, type[Any]] = {"Take": Take, "Stall": Stall}


@dataclass(frozen=True)
class Step:
    """One rule call: the rule's name and its arguments as the rule received them."""

    rule: str
    args: dict[str, Any]

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"state.{self.rule}({args})"


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {type(value).__name__: dataclasses.asdict(value)}
    if isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (list, tuple)):  # a priority schedule's order and change points
        return [_encode(v) for v in value]
    raise TypeError(f"a rule argument of type {type(value).__name__} cannot be saved")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        kinds = ", ".join(_ARGUMENT_TYPES)
        example = '{"Take": {"worker": 0, "held": false}}'
        if len(value) != 1 or next(iter(value)) not in _ARGUMENT_TYPES:
            raise ValueError(
                f"{json.dumps(value)} is no argument: write a type ({kinds}) and its fields, "
                f"e.g. {example}"
            )
        ((name, fields),) = value.items()
        kind = _ARGUMENT_TYPES[name]
        try:
            return kind(**fields)
        except TypeError:
            names = ", ".join(f.name for f in dataclasses.fields(kind))
            raise ValueError(f"{name} takes the fields {names}, got {json.dumps(fields)}") from None
    return value


def to_json(steps: list[Step]) -> list[dict[str, Any]]:
    """Return `steps` as plain JSON values."""
    return [{"rule": s.rule, "args": {k: _encode(v) for k, v in s.args.items()}} for s in steps]


def from_json(data: Any) -> list[Step]:
    """Return the steps of a saved program; raise ValueError if it is not one."""
    if not isinstance(data, list):
        raise ValueError("'program' must be a list of rule calls")
    steps = []
    for i, s in enumerate(data, 1):
        try:
            steps.append(
                Step(str(s["rule"]), {str(k): _decode(v) for k, v in dict(s["args"]).items()})
            )
        except (KeyError, TypeError, ValueError) as exc:
            what = f"{exc} missing" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(
                f"program step {i} is malformed: {what} (a step is "
                '{"rule": NAME, "args": {...}}, as a failing run prints it)'
            ) from None
    return steps


def digest(steps: list[Step]) -> str:
    """Return a short hash of `steps`, to tell saved programs apart by name."""
    text = json.dumps(to_json(steps), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


F = TypeVar("F", bound=Callable[..., Any])


def recorded(rule: F) -> F:
    """Append each call of a machine's rule to its `program` before running it."""

    @functools.wraps(rule)
    def run(self: Any, **args: Any) -> Any:
        self.program.append(Step(rule.__name__, args))
        return rule(self, **args)

    return run  # type: ignore[return-value]
