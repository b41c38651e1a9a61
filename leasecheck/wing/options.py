"""The plugin's options, declared once for pytest and the `leasecheck check` command,
and the space form of path options (`--leasecheck-dir DIR`) made to work.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from leasecheck.dbfixtures import plugin as dbplugin
from leasecheck.stateful.engine import isolation, profiles
from leasecheck.wing import shards


def declare_options(add: Callable[..., object]) -> None:
    """Declare the property run's options through `add` (pytest's `addoption`, or the
    `leasecheck check` command's, which accepts every one of them)."""
    add(
        "--leasecheck-queue",
        metavar="MODULE:ATTR",
        help="the queue under test: a class, a zero-argument factory or an instance "
        "(default: $LEASECHECK_QUEUE, then the leasecheck_queue ini option)",
    )
    add(
        "--leasecheck-excuse",
        action="append",
        default=[p for p in os.environ.get("LEASECHECK_EXCUSE", "").split(",") if p.strip()],
        metavar="PROPERTY",
        help="stop judging this property, to see the next violation (repeatable, or a "
        "comma-separated list; default: $LEASECHECK_EXCUSE, comma-separated)",
    )
    add(
        "--leasecheck-dir",
        default=os.environ.get("LEASECHECK_DIR", ".leasecheck"),
        metavar="DIR",
        help="where a failing run writes its program, history and pictures, and the dev "
        "profile keeps failing examples (default: $LEASECHECK_DIR or .leasecheck; a "
        "directory leasecheck creates gets a .gitignore)",
    )
    add(
        "--leasecheck-profile",
        default=profiles.default(),
        choices=sorted(profiles.PROFILES),
        help="search budget: dev, ci (derandomized) or deep (default: $LEASECHECK_PROFILE, "
        "else ci when $CI is set, else dev)",
    )
    add(
        "--leasecheck-schedule",
        default=os.environ.get("LEASECHECK_SCHEDULE", "random"),
        choices=["random", "pct", "mixed"],
        help="who makes the workers' own moves: random (each rule draws its worker), "
        "pct (priorities with up to two change points an example, after PCT), or mixed "
        "(random on even shards, pct on odd ones) (default: $LEASECHECK_SCHEDULE, else random)",
    )
    add(
        "--leasecheck-opening",
        default=os.environ.get("LEASECHECK_OPENING", "on"),
        choices=["on", "off"],
        help="before the search, play the opening's fixed stories (each takeover of a "
        "sleeper's job, a worker reclaiming its own expired job, a report paused in "
        "flight, leases run out to the retry cap) and search the small scopes whole (a "
        "few workers, jobs and moves: every program of each), each shard its share; off "
        "runs the search alone (default: $LEASECHECK_OPENING, else on)",
    )
    add(
        "--leasecheck-shrink",
        default=os.environ.get("LEASECHECK_SHRINK", "profile"),
        type=_shrink_budget,
        metavar="N|full",
        help="the most examples a shard runs to shrink a failure before telling the "
        "smallest it found (then leasecheck deletes the steps it does not need); full "
        "leaves Hypothesis its own bound (default: $LEASECHECK_SHRINK, else the "
        "profile's: 25 for dev and ci, full for deep)",
    )
    add(
        "--leasecheck-isolation",
        default=isolation.from_env(),
        choices=list(isolation.MODES),
        help="the isolation level of the transactions the harness holds open around a "
        "queue's calls: read-committed, repeatable-read, serializable, or drawn (each "
        "held transaction draws its own, as part of the program) (default: "
        "$LEASECHECK_ISOLATION, else read-committed)",
    )
    add(
        "--leasecheck-shards",
        type=int,
        default=shards.DEFAULT_COUNT,
        metavar="S",
        help=f"split the property run into S test items with seeds of their own, so "
        f"-n auto fills the cores (default: {shards.DEFAULT_COUNT})",
    )
    add(
        "--leasecheck-shard",
        default=os.environ.get("LEASECHECK_SHARD"),
        metavar="I/N",
        help="run only this machine's part of the shards, for a CI matrix of N machines "
        "(1-based; default: $LEASECHECK_SHARD, else all)",
    )
    add(
        "--leasecheck-call-deadline",
        default=os.environ.get("LEASECHECK_CALL_DEADLINE", "30"),
        type=_seconds,
        metavar="SECONDS",
        help="how long one call of the queue may neither answer nor wait on a transaction "
        "the run holds open before its statement is cancelled; a call that goes on after "
        "that (a library's retry or reconnect loop) stops the run, with no verdict "
        "(default: $LEASECHECK_CALL_DEADLINE, else 30)",
    )
    add(
        "--leasecheck-report",
        default=os.environ.get("LEASECHECK_REPORT"),
        metavar="FILE",
        help="write the run's verdicts as JSON to FILE: per property its verdict, counts "
        "and situations, and each failure with its story and files (default: "
        "$LEASECHECK_REPORT; under GitHub Actions a job summary is written as well)",
    )
    add(
        "--leasecheck-examples-from",
        default=os.environ.get("LEASECHECK_EXAMPLES_FROM"),
        metavar="DIR",
        help="also try first the saved examples of DIR, read-only: a campaign's merged "
        "failure directory (`leasecheck campaign merge`); dev and deep only, as ci is "
        "derandomized (default: $LEASECHECK_EXAMPLES_FROM)",
    )
    add(
        "--leasecheck-regressions",
        metavar="DIR",
        help="replay every failure file (*.json) in DIR as a test of its own (default: "
        "the leasecheck_regressions ini option; a DIR not made yet is a skip that says so)",
    )


def from_environment_unchosen(value_of: Callable[[str], object]) -> str | None:
    """Return the one-line error for an option whose value, taken from its environment
    variable, is not one of its choices, or None. argparse checks choices only on the
    command line, so `LEASECHECK_OPENING=of` would otherwise run as if it said off."""
    declared: list[tuple[str, dict[str, Any]]] = []
    declare_options(lambda *flags, **attrs: declared.append((flags[0], attrs)))
    for flag, attrs in declared:
        choices, value = attrs.get("choices"), value_of(flag)
        if choices and value not in choices:
            env = "LEASECHECK_" + flag.removeprefix("--leasecheck-").upper().replace("-", "_")
            return (
                f"leasecheck: ${env}={value!r} is not a value of {flag}: "
                f"set it to one of {', '.join(choices)}, or unset it"
            )
    return None


def _seconds(value: str) -> float:
    """Accept a positive number of seconds."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds: give one, e.g. 30")
    return seconds


def _shrink_budget(value: str) -> str:
    """Accept a shrink budget: `profile`, `full`, or a count of examples (0 or more)."""
    if value in ("profile", "full") or (value.isdigit() and int(value) >= 0):
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r} is not a shrink budget: give a count of examples (e.g. 25), or full"
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leasecheck", "leasecheck: property tests for job queues")
    declare_options(group.addoption)
    parser.addini("leasecheck_queue", "leasecheck: the queue under test, as module:attr")
    parser.addini(
        "leasecheck_regressions",
        "leasecheck: directory of failure files to replay as tests (relative to this file)",
        type="paths",
    )


def option_names() -> list[str]:
    """Return the name of every `--leasecheck-*` option (each takes a value)."""
    names: list[str] = []

    def add(*flags: str, **attrs: Any) -> None:
        names.extend(flags)

    declare_options(add)
    dbplugin.declare_options(add)
    return names


# ------------------------------------------------- `--leasecheck-dir DIR`, both forms


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser
) -> Iterator[None]:
    """Make `--leasecheck-dir DIR` mean what `--leasecheck-dir=DIR` means, wherever DIR is.

    pytest looks for its configuration file from the paths on the command line
    before it loads plugins, so it takes the DIR of an option it does not know yet
    for a test path and, when DIR lies outside the project, finds no configuration
    (or another project's). By now it knows the option: if DIR changed where the
    configuration came from, run the same command again with `=` before any output
    (pytest.main() in a process of one's own, which cannot be run again, stops with
    one line saying to write `=`).
    """
    _rerun_with_equals(early_config, parser)
    return (yield)


def _rerun_with_equals(config: pytest.Config, parser: pytest.Parser) -> None:
    if os.environ.pop("LEASECHECK_RERUN", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the run again (its own tests' pytest runs see no trace of it), or a worker
    names = set(option_names())
    args = list(config.invocation_params.args)
    addopts = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    fixed_args, fixed_addopts = equals_form(args, names), equals_form(addopts, names)
    if (fixed_args, fixed_addopts) == (args, addopts):
        return
    if not _discovery_changed(config, parser.parse_known_args([*fixed_addopts, *fixed_args])):
        return
    tail = len(args)
    if sys.orig_argv[len(sys.orig_argv) - tail :] != args or sys.argv[1:] != args:
        moved = [w for w in fixed_addopts + fixed_args if "=" in w and w.split("=")[0] in names]
        raise pytest.UsageError(
            f"leasecheck: pytest took the value of {moved[0].split('=')[0]} for a test path "
            "before it knew the option, and so read its configuration from elsewhere: "
            f"write {moved[0]}"
        )  # pytest.main() in a process of its own: not a command line to run again
    env = dict(os.environ, LEASECHECK_RERUN="1")
    if addopts:
        env["PYTEST_ADDOPTS"] = shlex.join(fixed_addopts)
    prefix = sys.orig_argv[1 : len(sys.orig_argv) - tail]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *prefix, *fixed_args], env)


def equals_form(args: Sequence[str], names: set[str]) -> list[str]:
    """Return `args` with every `--leasecheck-X VALUE` written `--leasecheck-X=VALUE`,
    where VALUE names an existing path (the only values pytest takes for test paths)."""
    out: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--":
            out += [word, *words]
            break
        if word in names:
            value = next(words, None)
            if value is None:
                out.append(word)
            elif not value.startswith("-") and os.path.exists(value.split("::")[0]):
                out.append(f"{word}={value}")
            else:
                out += [word, value]
            continue
        out.append(word)
    return out


def _discovery_changed(config: pytest.Config, ns: Any) -> bool:
    """Return whether pytest, reading the command line `ns` (its `=` form), would find
    another rootdir or configuration file than it did (True when this pytest cannot say)."""
    try:
        from _pytest.config.findpaths import determine_setup

        given = {
            "inifile": ns.inifilename,
            "override_ini": ns.override_ini,
            "args": ns.file_or_dir,
            "rootdir_cmd_arg": ns.rootdir or None,
            "invocation_dir": config.invocation_params.dir,
        }
        accepted = inspect.signature(determine_setup).parameters
        found = determine_setup(**{k: v for k, v in given.items() if k in accepted})
        return (Path(found[0]), found[1]) != (config.rootpath, config.inipath)
    except Exception:
        return True
