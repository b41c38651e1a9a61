"""Replay a saved program step by step against a queue, outside Hypothesis's search.

The machine runs the program's rule calls in order, checks every property after
each, and tears down as Hypothesis would (heal, finish, drain, judge). Against the
queue that produced it, a program replays to the same story. Against another
queue it may diverge: a step whose precondition no longer holds (no claim to
complete, say) is skipped and reported, never forced.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasecheck.stateful import program
from leasecheck.stateful.machine import REPLAYER, Harness
from leasecheck.stateful.program import Step

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
    return Saved(
        steps=program.from_json(data["program"]),
        queue=str(data.get("queue", "")),
        queue_spec=str(data.get("queue_spec", "")),
        prop=str(data.get("property", "")),
        violation=str(data.get("violation", "")),
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


def _rule(name: str) -> Any:
    method = getattr(REPLAYER, name, None)
    for marker in _MARKERS:
        rule = getattr(method, marker, None)
        if rule is not None:
            return rule
    raise ValueError(f"the program calls {name!r}, which is not a rule of this leasecheck")
