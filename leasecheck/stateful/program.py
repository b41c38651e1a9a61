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

from leasecheck.stateful.engine.moves import Stall, Take

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
        ((name, fields),) = value.items()
        if name not in _ARGUMENT_TYPES:
            raise ValueError(f"unknown rule argument type {name!r}")
        return _ARGUMENT_TYPES[name](**fields)
    return value


def to_json(steps: list[Step]) -> list[dict[str, Any]]:
    """Return `steps` as plain JSON values."""
    return [{"rule": s.rule, "args": {k: _encode(v) for k, v in s.args.items()}} for s in steps]


def from_json(data: Any) -> list[Step]:
    """Return the steps of a saved program; raise ValueError if it is not one."""
    if not isinstance(data, list):
        raise ValueError("'program' must be a list of rule calls")
    try:
        return [
            Step(str(s["rule"]), {str(k): _decode(v) for k, v in dict(s["args"]).items()})
            for s in data
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed program step: {exc}") from None


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
