"""pytest plugin (entry point `leasecheck`): the queue under test and the property run.

Installing leasecheck registers this plugin, and it stays inert: it adds
`--leasecheck-*` options and `leasecheck_*` fixtures and does nothing more (no
server, no queue import, no files) unless the run collects leasecheck's property
tests, the ones `leasecheck.suite` holds (`from leasecheck.suite import *` in a test
file, or `pytest --pyargs leasecheck.suite`). Then it loads the queue the run names,
splits the search into shards, and a failure leaves its files in `--leasecheck-dir`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from leasecheck import exercised, shards
from leasecheck.dbfixtures import janitor
from leasecheck.dbfixtures import plugin as dbplugin
from leasecheck.stateful import actors, clock, contract, probe, profiles, properties
from leasecheck.stateful.machine import Harness

SUITE = "leasecheck.suite"
QUEUE_HELP = (
    "name the queue under test: pytest --leasecheck-queue module:attr, "
    'LEASECHECK_QUEUE=module:attr, or leasecheck_queue = "module:attr" under '
    "[tool.pytest.ini_options] in pyproject.toml"
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Bring in the database half of the plugin (servers and databases) with this one."""
    if not pluginmanager.is_registered(dbplugin):
        pluginmanager.register(dbplugin, "leasecheck.dbfixtures")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leasecheck", "leasecheck: property tests for job queues")
    group.addoption(
        "--leasecheck-queue",
        metavar="MODULE:ATTR",
        help="the queue under test: a class, a zero-argument factory or an instance "
        "(default: $LEASECHECK_QUEUE, then the leasecheck_queue ini option)",
    )
    parser.addini("leasecheck_queue", "leasecheck: the queue under test, as module:attr")
    group.addoption(
        "--leasecheck-excuse",
        action="append",
        default=[p for p in os.environ.get("LEASECHECK_EXCUSE", "").split(",") if p],
        metavar="PROPERTY",
        help="stop judging this property, to see the next violation (repeatable; "
        "$LEASECHECK_EXCUSE, comma-separated)",
    )
    group.addoption(
        "--leasecheck-dir",
        default=os.environ.get("LEASECHECK_DIR", ".leasecheck"),
        metavar="DIR",
        help="where a failing run writes its program, history and pictures, and the dev "
        "profile keeps failing examples (default: $LEASECHECK_DIR or .leasecheck)",
    )
    group.addoption(
        "--leasecheck-profile",
        default=profiles.default(),
        choices=sorted(profiles.PROFILES),
        help="search budget: dev, ci (derandomized) or deep (default: $LEASECHECK_PROFILE, "
        "else ci when $CI is set, else dev)",
    )
    group.addoption(
        "--leasecheck-shards",
        type=int,
        default=shards.DEFAULT_COUNT,
        metavar="S",
        help=f"split the property run into S test items with seeds of their own, so "
        f"-n auto fills the cores (default: {shards.DEFAULT_COUNT})",
    )
    group.addoption(
        "--leasecheck-shard",
        default=os.environ.get("LEASECHECK_SHARD"),
        metavar="I/N",
        help="run only this machine's part of the shards, for a CI matrix of N machines "
        "(1-based; default: $LEASECHECK_SHARD, else all)",
    )
    group.addoption(
        "--leasecheck-regressions",
        metavar="DIR",
        help="replay every failure file (*.json) in DIR as a test of its own (default: "
        "the leasecheck_regressions ini option)",
    )
    parser.addini(
        "leasecheck_regressions",
        "leasecheck: directory of failure files to replay as tests (relative to this file)",
        type="paths",
    )


# -------------------------------------------------------------- the queue under test


def queue_spec(config: pytest.Config) -> tuple[str, str] | None:
    """Return the queue's `module:attr` and where it was named, or None if nowhere."""
    for value, where in (
        (config.getoption("--leasecheck-queue"), "--leasecheck-queue"),
        (os.environ.get("LEASECHECK_QUEUE"), "LEASECHECK_QUEUE"),
        (config.getini("leasecheck_queue"), "leasecheck_queue (ini)"),
    ):
        if value:
            return str(value), where
    return None


class Unusable(Exception):
    """The run cannot judge a queue; the message is the one line to show."""


_queue_key = pytest.StashKey[contract.Queue | Unusable]()


def _load_queue(config: pytest.Config) -> contract.Queue:
    """Return the named queue (imported once per process); raise Unusable otherwise."""
    if _queue_key not in config.stash:
        named = queue_spec(config)
        if named is None:
            config.stash[_queue_key] = Unusable(f"leasecheck: no queue named; {QUEUE_HELP}")
        else:
            try:
                config.stash[_queue_key] = contract.load(named[0])
            except contract.ContractError as exc:
                config.stash[_queue_key] = Unusable(f"leasecheck: {named[1]} {exc}")
    found = config.stash[_queue_key]
    if isinstance(found, Unusable):
        raise found
    return found


def excused(config: pytest.Config) -> frozenset[str]:
    """Return the properties `--leasecheck-excuse` takes out of judgement."""
    return frozenset(config.getoption("--leasecheck-excuse"))


def _check_options(config: pytest.Config) -> None:
    unknown = sorted(excused(config) - set(properties.ALL))
    if unknown:
        raise Unusable(
            f"leasecheck: --leasecheck-excuse {', '.join(unknown)}: no such property; "
            f"choose from {', '.join(properties.ALL)}"
        )
    regressions = _regressions_dir(config)
    if regressions is not None and not regressions.is_dir():
        raise Unusable(
            f"leasecheck: the regressions directory {regressions} does not exist; create it "
            "or correct --leasecheck-regressions / leasecheck_regressions"
        )
    try:
        shards.select(
            config.getoption("--leasecheck-shards"),
            shards.parse_slice(config.getoption("--leasecheck-shard")),
        )
    except shards.ShardError as exc:
        raise Unusable(f"leasecheck: {exc}") from None


def _regressions_dir(config: pytest.Config) -> Path | None:
    option = config.getoption("--leasecheck-regressions")
    if option:
        return Path(option)
    ini: list[Path] = config.getini("leasecheck_regressions")
    return ini[0] if ini else None


# ------------------------------------------------------------------------ collection


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if "leasecheck_shard" in metafunc.fixturenames:
        try:
            chosen = shards.select(
                config.getoption("--leasecheck-shards"),
                shards.parse_slice(config.getoption("--leasecheck-shard")),
            )
        except shards.ShardError:
            chosen = []  # reported once, as a usage error, when collection ends
        metafunc.parametrize("leasecheck_shard", chosen, ids=[s.id for s in chosen])
    if "leasecheck_gap" in metafunc.fixturenames:
        try:
            queue = _load_queue(config)
        except Unusable:
            gaps = ["unknown: the queue could not be loaded"]
        else:
            gaps = contract.not_checked(queue)
            gaps += [f"{p}: excused (--leasecheck-excuse)" for p in sorted(excused(config))]
            if not gaps:
                gaps = [f"nothing: {queue.name} declares nothing that rules a property out"]
        metafunc.parametrize("leasecheck_gap", gaps, ids=[g.split(":")[0] for g in gaps])
    if "leasecheck_regression" in metafunc.fixturenames:
        directory = _regressions_dir(config)
        files: list[Path | None] = [*sorted(directory.glob("*.json"))] if directory else []
        files = files or [None]
        ids = [f.stem if f else "none" for f in files]
        metafunc.parametrize("leasecheck_regression", files, ids=ids)


def _is_suite(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    return getattr(function, "__module__", None) == SUITE


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Load the queue and check the options, only if leasecheck's property tests were collected.

    A problem is one usage error: raised here without xdist, and handed to the
    controller by each xdist worker (a worker's error would print as a crash).
    """
    facts: dict[str, Any] = {"needs_server": dbplugin.needs_server(items)}
    if any(_is_suite(item) for item in items):
        try:
            _check_options(config)
            queue = _load_queue(config)
            named = queue_spec(config)
            assert named is not None
            facts["queue"] = f"leasecheck: queue under test {queue.name!r} ({named[0]})"
            if excused(config):
                facts["queue"] += f"; not judged: {', '.join(sorted(excused(config)))}"
        except Unusable as exc:
            facts["error"] = str(exc)
    if hasattr(config, "workerinput"):
        if facts != {"needs_server": False}:
            dbplugin.report_collection(config, facts)
        return
    _act_on(config, facts)
    if facts["needs_server"]:
        dbplugin.start_server(config)
        _probe_clock(config, facts)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Act on a worker's collection before xdist schedules its first test."""
    facts = dbplugin.collected_facts(node.config, node.gateway.id)
    _act_on(node.config, facts)
    if facts.get("needs_server"):
        dbplugin.share_server(node.config)
        _probe_clock(node.config, facts)


_said_key = pytest.StashKey[bool]()


def _act_on(config: pytest.Config, facts: dict[str, Any]) -> None:
    if "error" in facts:
        dbplugin.stop(config, facts["error"])
    if "queue" in facts and not config.stash.get(_said_key, False):
        config.stash[_said_key] = True
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(facts["queue"])


_probed_key = pytest.StashKey[bool]()


def _probe_clock(config: pytest.Config, facts: dict[str, Any]) -> None:
    """Stop the run in one line if the queue under test does not follow simulated time.

    Asked once per run, in a database of its own, before any test: otherwise every
    shard would report the symptoms (jobs never handed out again) as violations.
    """
    if "queue" not in facts or config.stash.get(_probed_key, False):
        return
    config.stash[_probed_key] = True
    queue = _load_queue(config)
    server = dbplugin.start_server(config)
    try:
        with janitor.temporary(server.dsn, "clock_probe") as dsn:
            clock.prepare(dsn, queue)
            with clock.connect(dsn) as conn:
                problem = probe.clock_problem(queue, conn)
    except Exception as exc:  # the queue's install or calls, or the server: one line
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        problem = f"leasecheck: {queue.name} could not be installed and probed: {detail}"
    if problem is not None:
        dbplugin.stop(config, problem)


# -------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def leasecheck_queue(pytestconfig: pytest.Config) -> contract.Queue:
    """Return the queue under test, as the run names it."""
    return _load_queue(pytestconfig)


@pytest.fixture(scope="session")
def leasecheck_installed_dsn(leasecheck_database: str, leasecheck_queue: contract.Queue) -> str:
    """Return a DSN for this worker's database with the harness and the queue installed."""
    clock.prepare(leasecheck_database, leasecheck_queue)
    return leasecheck_database


@pytest.fixture
def leasecheck_harness(
    leasecheck_installed_dsn: str, leasecheck_queue: contract.Queue, pytestconfig: pytest.Config
) -> Iterator[Harness]:
    """Return a harness on this worker's database, reset for a new run of the machine."""
    named = queue_spec(pytestconfig)
    pool = actors.Pool(leasecheck_installed_dsn)
    harness = Harness(
        queue=leasecheck_queue,
        pool=pool,
        excused=excused(pytestconfig),
        spec=named[0] if named else "",
    )
    harness.reset()
    try:
        yield harness
    finally:
        pool.close()


@pytest.fixture
def leasecheck_out(pytestconfig: pytest.Config) -> Path:
    """Return the directory failure files go to (created only when one is written)."""
    return Path(pytestconfig.getoption("--leasecheck-dir"))


@pytest.fixture
def leasecheck_budget(pytestconfig: pytest.Config, leasecheck_out: Path) -> settings:
    """Return the Hypothesis settings of the chosen profile."""
    return profiles.budget(
        pytestconfig.getoption("--leasecheck-profile"), leasecheck_out / "examples"
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say what the property run exercised, per property (nothing if it did not run)."""
    exercised.hook(terminalreporter, config)
