"""Replay a saved program step by step against a queue, outside Hypothesis's search.

The machine runs the program's rule calls in order, checks every property after
each, and tears down as Hypothesis would (heal, finish, drain, judge). Against the
queue that produced it, a program replays to the same story. Against another
queue it may diverge: a step whose precondition no longer holds (no claim to
complete, say) is skipped and reported, never forced.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasecheck.stateful import program
from leasecheck.stateful.machine import REPLAYER, Harness
from leasecheck.stateful.program import Step
from leasecheck.stateful.properties import ALL

# Hypothesis marks rule methods with these attributes; each carries `preconditions`.
_MARKERS = ("hypothesis_stateful_initialize_rule", "hypothesis_stateful_rule")


@dataclass(frozen=True)
class Saved:
    """A failure file: its program and what the run that wrote it said."""

    steps: list[Step]
    queue: str
    queue_spec: str
    prop: str
    violation: str
    excused: frozenset[str] = frozenset()
    """The properties the run that found it excused: a replay judges as it did, or the
    first property it excused, not the one it found, would fail the replay."""


@dataclass
class Replayed:
    """What a replay did: the steps it ran and those it skipped, with why."""

    ran: list[Step] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def load(path: Path) -> Saved:
    """Read a failure file; raise ValueError with a one-line reason if it is not one."""
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict) or "program" not in data:
        raise ValueError(
            f"{path}: not a leasecheck failure file with a program (written by "
            f"leasecheck {program.FORMAT} or later, as .leasecheck/QUEUE-PROPERTY-HASH.json)"
        )
    if data.get("format") != program.FORMAT:
        raise ValueError(
            f"{path}: program format {data.get('format')!r}, this leasecheck reads {program.FORMAT}"
        )
    steps = program.from_json(data["program"])
    check(steps)
    excused = data.get("excused", [])
    unknown = [p for p in excused if p not in ALL] if isinstance(excused, list) else [excused]
    if unknown:
        raise ValueError(
            f'{path}: "excused" must list property ids ({", ".join(ALL)}), not {unknown[0]!r}'
        )
    return Saved(
        steps=steps,
        queue=str(data.get("queue", "")),
        queue_spec=str(data.get("queue_spec", "")),
        prop=str(data.get("property", "")),
        violation=str(data.get("violation", "")),
        excused=frozenset(excused),
    )


def replay(
    harness: Harness, steps: list[Step], say: Callable[[str], None] | None = None
) -> Replayed:
    """Run `steps` on a fresh machine; a broken property raises its PropertyViolated.

    With `say`, the story is told to it as a failing example's is printed: each step's
    lines, then the step itself, with the workers (or claims) its picks fell on.
    """
    rules = [_rule(step.rule) for step in steps]  # an unknown rule fails before any SQL
    machine = REPLAYER(harness)
    if say is not None:
        machine.d.core.say = say
    done = Replayed()
    try:
        for number, (step, rule) in enumerate(zip(steps, rules, strict=True), 1):
            if not all(holds(machine) for holds in getattr(rule, "preconditions", ())):
                done.skipped.append(f"step {number} {step}: its precondition does not hold")
                continue
            getattr(machine, step.rule)(**step.args)
            done.ran.append(step)
            if say is not None:  # and whom its picks fell on, as the story names them
                picked = ", ".join(dict.fromkeys(machine.d.core.picked))
                say(f"{step}  # {picked}" if picked else str(step))
            machine.every_property_holds()
    finally:
        machine.teardown()
    return done


def check(steps: list[Step]) -> None:
    """Raise ValueError, with a one-line reason, at the first step no rule of this
    leasecheck takes as it is written: an unknown rule, an argument missing, unknown or
    of another type (a hand-written program fails here, before any server starts)."""
    for number, step in enumerate(steps, 1):
        _rule(step.rule)
        method = inspect.unwrap(getattr(REPLAYER, step.rule))
        try:
            inspect.signature(method).bind(None, **step.args)
        except TypeError as exc:
            raise ValueError(f"step {number} ({step.rule}): {exc}") from None
        hints = typing.get_type_hints(method)
        for name, value in step.args.items():
            wrong = _mistyped(value, hints.get(name, Any), name)
            if wrong is not None:
                raise ValueError(f"step {number} ({step.rule}): {wrong}")


def _mistyped(value: Any, want: Any, name: str) -> str | None:
    """Return why `value` is not a `want` (a type, a union, or a dataclass of such), or None."""
    if want is Any:
        return None
    options = typing.get_args(want) if isinstance(want, types.UnionType) else (want,)
    if type(None) in options and value is None:
        return None
    for option in options:
        kind = typing.get_origin(option) or option  # Sequence[int]: a Sequence, of ints
        if option is type(None) or not isinstance(kind, type):
            continue
        if dataclasses.is_dataclass(kind) and isinstance(value, kind):
            fields = typing.get_type_hints(kind)
            for f in dataclasses.fields(kind):
                wrong = _mistyped(getattr(value, f.name), fields[f.name], f"{name}.{f.name}")
                if wrong is not None:
                    return wrong
            return None
        # bool is an int to Python, never to a program: `pick: true` is a mistake
        if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            (inner, *_) = [*typing.get_args(option), Any]
            sequence = kind is not str and inner is not Any  # Sequence[int], never str
            items = list(typing.cast("Iterable[Any]", value)) if sequence else []
            for i, item in enumerate(items):
                wrong = _mistyped(item, inner, f"{name}[{i}]")
                if wrong is not None:
                    return wrong
            return None
    said = " or ".join("null" if o is type(None) else o.__name__ for o in options)
    try:
        shown = json.dumps(value)  # as the program's file writes it
    except TypeError:
        shown = repr(value)
    return f"{name} must be {said}, not {shown}"


def _rule(name: str) -> Any:
    method = getattr(REPLAYER, name, None)
    for marker in _MARKERS:
        rule = getattr(method, marker, None)
        if rule is not None:
            return rule
    raise ValueError(f"the program calls {name!r}, which is not a rule of this leasecheck")
