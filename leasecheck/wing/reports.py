"""A run's reports, once: a failure several shards find is told once, a contract error
once per run, and progress lines while the property run goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _pytest._code.code import (  # the report types xdist carries across as they are
    ReprEntryNative,
    ReprExceptionInfo,
    ReprFileLocation,
    ReprTraceback,
)

from leasecheck.dbfixtures import plugin as dbplugin
from leasecheck.stateful import contract
from leasecheck.stateful.properties import PropertyViolated
from leasecheck.wing.items import PROPERTIES_TEST
from leasecheck.wing.items import is_suite as _is_suite
from leasecheck.wing.items import param as _param

PROGRESS_EVERY = 10.0
"""Seconds between two progress lines of a property run."""


# ------------------------------------------------------------------ reports, once


_VIOLATION = "violation"
_CONTRACT = "contract"
_REGRESSION = "regression"
_SAVED = re.compile(r"^leasecheck: saved (.+?\.json) ", re.MULTILINE)
_PROP = re.compile(r"^\[([a-z-]+)\]")


def _told(story: str) -> list[str]:
    """Return the properties a story reports broken (its `[property] ...` lines)."""
    return [m.group(1) for line in story.splitlines() if (m := _PROP.match(line))]


def _failure_key(story: str) -> str:
    """Return what names a reported failure: the file saved for the property it reports
    first (files are named by queue, property and a hash of the program), else the line
    that reports it."""
    props = _told(story)
    for path in _SAVED.findall(story):
        if not props or f"-{props[0]}-" in Path(path).name:
            return str(path)
    lines = [line for line in story.splitlines() if _PROP.match(line)] or story.splitlines()
    return lines[0] if lines else ""


def _contract_error(error: BaseException | None) -> contract.ContractError | None:
    """Return the ContractError `error` is or carries (in a group, or as its cause)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, contract.ContractError):
            return error
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                found = _contract_error(inner)
                if found is not None:
                    return found
        error = error.__cause__ or error.__context__
    return None


def _violation(error: BaseException) -> PropertyViolated | None:
    if isinstance(error, PropertyViolated):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _violation(inner)
            if found is not None:
                return found
    return None


def _notes(error: BaseException) -> list[str]:
    return [str(n) for n in getattr(error, "__notes__", ())]


CONTRACT_FAILED = "leasecheck: contract error: "
"""How `leasecheck.suite` fails a property shard whose queue broke the contract."""


def _story(item: pytest.Item, error: BaseException) -> tuple[str, str, str] | None:
    """Return (kind, key, text) of a failure of leasecheck's tests, told as a story, or
    None for a failure whose traceback is the story (the queue's own exception)."""
    shard = _param(item, "leasecheck_shard")
    where = f" ({shard.id})" if shard is not None else ""
    told = str(error.msg) if isinstance(error, pytest.fail.Exception) else None
    if told is not None and told.startswith(CONTRACT_FAILED):
        text = (
            f"leasecheck: the queue broke the contract{where}, so no property was judged: "
            f"{told[len(CONTRACT_FAILED) :]}"
        )
        return _CONTRACT, _CONTRACT, text
    broken = _contract_error(error)
    if broken is not None:
        lines = [
            f"leasecheck: the queue broke the contract{where}, so no property was judged: {broken}",
            *_notes(broken),
        ]
        return _CONTRACT, _CONTRACT, "\n".join(lines)
    if told is not None and item.name.startswith(PROPERTIES_TEST):
        return _VIOLATION, _failure_key(told), told
    regression = _param(item, "leasecheck_regression")
    violated = _violation(error)
    if regression is not None and violated is not None:
        lines = [
            str(violated),
            *_notes(violated),
            f"leasecheck: the committed failure {regression} breaks "
            f"{violated.violation.prop} again; replay it with: leasecheck replay {regression}",
        ]
        return _REGRESSION, str(regression), "\n".join(lines)
    return None


def _told_as(text: str, headline: str, item: pytest.Item) -> ReprExceptionInfo:
    """Return the story as pytest's native-style report: printed as it is, with the
    headline as its crash message. pytest's short summary quotes that message, whole
    under CI, so a plain-text story was printed a second time there, in full; xdist
    carries this form from its workers as it is."""
    path, line, _ = item.location
    return ReprExceptionInfo(
        reprtraceback=ReprTraceback(
            [ReprEntryNative([f"{one}\n" for one in text.splitlines()])], None, "native"
        ),
        reprcrash=ReprFileLocation(path, (line or 0) + 1, headline),
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Tell a failure of leasecheck's tests as its story, without the traceback through
    the harness (which would only repeat it, and show the harness's insides)."""
    report = yield
    if call.excinfo is None or not report.failed or not _is_suite(item):
        return report
    told = _story(item, call.excinfo.value)
    if told is None:
        return report
    kind, key, text = told
    headline = next((line for line in text.splitlines() if _PROP.match(line)), text.splitlines()[0])
    report.longrepr = _told_as(text, headline, item)
    info = {"kind": kind, "key": key, "line": headline, "props": _told(text)}
    report.leasecheck = info  # type: ignore[attr-defined]
    if kind == _CONTRACT:
        _remember_contract_error(item.config, item.name, text.splitlines()[0])
    if kind == _VIOLATION and "NOT A VERDICT" not in text:
        _remember_broken(item.config, item.name, _told(text))
    return report


_contract_key = pytest.StashKey[dict[str, str]]()
_broken_key = pytest.StashKey[dict[str, str]]()


def _remember_broken(config: pytest.Config, test: str, props: list[str]) -> None:
    """Leave word that a shard told a failure of each of `props` in full, so the other
    shards stop spending on them (`told_elsewhere`)."""
    shard = test.split("[")[-1].rstrip("]")
    mine = config.stash.setdefault(_broken_key, {})
    shared = dbplugin.run_dir(config)
    for prop in props:
        mine.setdefault(prop, shard)
        if shared is not None and not (shared / f"broken-{prop}.json").exists():
            with contextlib.suppress(OSError):
                dbplugin.write_shared(shared / f"broken-{prop}.json", {"shard": shard})


def told_elsewhere(config: pytest.Config) -> dict[str, str]:
    """Return each property a shard of this run has told a failure of, and that shard."""
    mine: dict[str, str] = config.stash.get(_broken_key, {})
    found = dict(mine)
    shared = dbplugin.run_dir(config)
    if shared is not None:
        for path in shared.glob("broken-*.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                found.setdefault(
                    path.stem.removeprefix("broken-"), json.loads(path.read_text())["shard"]
                )
    return found


def _remember_contract_error(config: pytest.Config, test: str, line: str) -> None:
    """Leave word that the queue broke the contract, so shards not yet begun are not run."""
    found = {"test": test.split("[")[-1].rstrip("]"), "line": line}
    config.stash.setdefault(_contract_key, found)
    shared = dbplugin.run_dir(config)
    if shared is not None and not (shared / "contract.json").exists():
        with contextlib.suppress(OSError):
            dbplugin.write_shared(shared / "contract.json", found)


def not_after_a_contract_error(config: pytest.Config) -> None:
    found = None
    shared = dbplugin.run_dir(config)
    if shared is not None and (shared / "contract.json").exists():
        with contextlib.suppress(OSError, ValueError):
            found = json.loads((shared / "contract.json").read_text())  # the run's first
    found = found or config.stash.get(_contract_key, None)
    if found is not None:
        pytest.skip(
            f"leasecheck: not run: the queue broke the contract in {found['test']} "
            "(reported there in full)"
        )


# ------------------------------------------------------------- progress, and once


@dataclass
class Progress:
    """What this process's shards have done, written where the controller reads it."""

    config: pytest.Config
    examples: int = 0
    """Examples Hypothesis generated: not those it ran to shrink a failure."""
    shrinking: str | None = None
    """The property whose failure this process's shard is shrinking, if it is."""
    since: float = 0.0
    """When that began (wall clock, as other processes read it)."""
    written: float = 0.0

    def example(self, generated: bool = True, failing: str | None = None) -> None:
        """An example ended: one Hypothesis `generated`, or one of its shrinking; `failing`
        names the property of the first failure this shard met (then it shrinks it)."""
        self.examples += generated
        if failing is not None and self.shrinking is None:
            self.shrinking, self.since = failing, time.time()
        self._maybe_flush()

    def idle(self) -> None:
        """The shard ended: nothing is being shrunk here any more."""
        self.shrinking = None
        self.flush()

    def _maybe_flush(self) -> None:
        shared = dbplugin.run_dir(self.config)
        if shared is None or not hasattr(self.config, "workerinput"):
            return
        now = time.monotonic()
        if now - self.written >= 1.0:
            self.written = now
            self.flush()

    def state(self) -> dict[str, Any]:
        return {"examples": self.examples, "shrinking": self.shrinking, "since": self.since}

    def flush(self) -> None:
        shared = dbplugin.run_dir(self.config)
        workerinput = getattr(self.config, "workerinput", None)
        if shared is not None and workerinput is not None:
            with contextlib.suppress(OSError):
                path = shared / f"progress-{workerinput['workerid']}.json"
                dbplugin.write_shared(path, self.state())


PROGRESS_KEY = pytest.StashKey[Progress]()


def progress_of(config: pytest.Config) -> Progress:
    if PROGRESS_KEY not in config.stash:
        config.stash[PROGRESS_KEY] = Progress(config)
    return config.stash[PROGRESS_KEY]


@dataclass
class RunState:
    """The controller's view of a property run: what it reports once, and its progress."""

    shards: int = 0
    started: float = 0.0
    done: set[str] = field(default_factory=set)
    first: dict[str, str] = field(default_factory=dict)
    """Each failure's key and the test that reported it in full."""
    broken: dict[str, str] = field(default_factory=dict)
    """Each violation's key and the properties it reports broken (comma-separated)."""
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self, config: pytest.Config, count: int) -> None:
        if self.thread is not None or count == 0:
            return
        self.shards = count
        self.started = time.monotonic()
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        self.thread = threading.Thread(
            target=self._report, args=(config, reporter), name="leasecheck-progress", daemon=True
        )
        self.thread.start()

    def _report(self, config: pytest.Config, reporter: Any) -> None:
        """Every PROGRESS_EVERY seconds, one line, until a line has said every shard is done
        (the run's other tests, if any, go on without them)."""
        while not self.stop.wait(PROGRESS_EVERY):
            with contextlib.suppress(Exception):  # never let a progress line end a run
                line = self.line(config)
                terminal = _terminal_while_captured(config)
                if terminal is not None:
                    os.write(terminal, f"\n{line}\n".encode())
                    continue
                writer = getattr(reporter, "_tw", None)
                if getattr(writer, "width_of_current_line", 0):
                    reporter.write("\n")  # after xdist's progress characters
                reporter.write_line(line)
            if len(self.done) >= self.shards:
                return

    def processes(self, config: pytest.Config) -> list[dict[str, Any]]:
        """Return what each process has done: this one's, and each xdist worker's file."""
        found = [progress_of(config).state()]
        shared = dbplugin.run_dir(config)
        if shared is not None:
            for path in shared.glob("progress-*.json"):
                with contextlib.suppress(OSError, ValueError, TypeError):
                    found.append(dict(json.loads(path.read_text())))
        return found

    def line(self, config: pytest.Config) -> str:
        """`leasecheck: 40 s: 1,200 examples generated, 3/8 shards done, ...`: examples
        Hypothesis generated (not those it ran to shrink), and what is happening."""
        seconds = time.monotonic() - self.started
        processes = self.processes(config)
        examples = sum(int(p.get("examples", 0)) for p in processes)
        props = sorted({p for told in self.broken.values() for p in told.split(",")})
        found = (
            f"{len(self.broken)} violation{'s' if len(self.broken) != 1 else ''} so far "
            f"({', '.join(props)})"
            if self.broken
            else "no violation so far"
        )
        shrinking = [
            (str(p["shrinking"]), float(p.get("since", 0))) for p in processes if p.get("shrinking")
        ]
        if shrinking:
            names = sorted({prop for prop, _ in shrinking})
            longest = time.time() - min(since for _, since in shrinking)
            where = f" in {len(shrinking)} shards" if len(shrinking) > 1 else ""
            found = f"shrinking a failure of {', '.join(names)}{where} ({longest:.0f} s)" + (
                f"; {found}" if self.broken else ""
            )
        return (
            f"leasecheck: {seconds:.0f} s: {examples:,} examples generated, "
            f"{len(self.done)}/{self.shards} shards done, {found}"
        )

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)


def _terminal_while_captured(config: pytest.Config) -> int | None:
    """Return the terminal's file descriptor while pytest captures this process's output
    (under -n 0 the shards run here, inside a test), else None.

    The line is written to the descriptor pytest's fd capture saved, not by suspending
    the capture: this thread toggling it could race the test's own thread and leave
    pytest's report captured. Read from pytest's capture manager (not public API); where
    it is not there, the line goes through the terminal reporter as before.
    """
    capture = config.pluginmanager.get_plugin("capturemanager")
    running = getattr(capture, "_global_capturing", None)
    if running is None or not running.is_started():
        return None
    saved = getattr(getattr(running, "out", None), "targetfd_save", None)
    return saved if isinstance(saved, int) else None


RUN_KEY = pytest.StashKey[RunState]()


def run_state(config: pytest.Config) -> RunState:
    if RUN_KEY not in config.stash:
        config.stash[RUN_KEY] = RunState()
    return config.stash[RUN_KEY]


class Reports:
    """In the process that prints (the controller under xdist), report each failure of
    leasecheck's once: a failure several shards found, or a contract error every shard
    met, is told in full by the first and in one line by the others; and count what
    the progress line says."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        config = self.config
        if hasattr(config, "workerinput") or RUN_KEY not in config.stash:
            return
        state = run_state(config)
        if f"::{PROPERTIES_TEST}[" in report.nodeid and (
            report.when == "teardown" or report.failed or report.skipped
        ):
            state.done.add(report.nodeid)
        info = getattr(report, "leasecheck", None)
        if not isinstance(info, dict) or report.when != "call" or not report.failed:
            return
        key = str(info.get("key", ""))
        if info.get("kind") == _VIOLATION:
            state.broken.setdefault(key, ",".join(info.get("props") or ["?"]))
        first = state.first.setdefault(key, report.nodeid)
        if first == report.nodeid:
            return
        name = first.rsplit("::", 1)[-1].split("[")[-1].rstrip("]")
        if info.get("kind") == _CONTRACT:
            report.longrepr = (
                f"leasecheck: the queue broke the contract here too; told in full under {name}"
            )
        else:
            report.longrepr = (
                f"{info.get('line')}: the same failure as {name}, told in full there ({key})"
            )
