"""pytest plugin (entry point `leasecheck`): the queue under test and the property run.

Installing leasecheck registers this plugin, and it stays inert: it adds
`--leasecheck-*` options and `leasecheck_*` fixtures and does nothing more (no
server, no queue import, no files, no output) unless the run collects leasecheck's
property tests, the ones `leasecheck.suite` holds (`from leasecheck.suite import *`
in a test file, or `pytest --pyargs leasecheck.suite`). Then it loads the queue the
run names, splits the search into shards, shows progress, and a failure leaves its
files in `--leasecheck-dir` and is reported once, as its story: a broken property
(whichever shards found it), a committed failure that breaks again, or a queue that
broke the contract.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from leasecheck.dbfixtures import janitor
from leasecheck.dbfixtures import plugin as dbplugin
from leasecheck.dbfixtures.redact import Dsn
from leasecheck.stateful import clock, contract
from leasecheck.stateful.engine import actors, probe, profiles, shrinking
from leasecheck.stateful.machine import Harness
from leasecheck.wing import exercised, outdir, runreport, shards, undertest
from leasecheck.wing.items import PROPERTIES_TEST, SUITE
from leasecheck.wing.items import is_suite as _is_suite
from leasecheck.wing.items import param as _param
from leasecheck.wing.options import (  # noqa: F401  (hooks: registered from this module)
    declare_options,
    equals_form,
    from_environment_unchosen,
    option_names,
    pytest_addoption,
    pytest_load_initial_conftests,
)
from leasecheck.wing.outdir import (
    mark_as_ours,
    out_dir,
    out_existed,
    pytest_configure_node,  # noqa: F401  (a hook)
)
from leasecheck.wing.reports import (
    PROGRESS_KEY,
    RUN_KEY,
    Reports,
    not_after_a_contract_error,
    progress_of,
    pytest_runtest_makereport,  # noqa: F401  (a hook)
    run_state,
    told_elsewhere,
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Bring in the database half of the plugin (servers and databases) with this one."""
    if not pluginmanager.is_registered(dbplugin):
        pluginmanager.register(dbplugin, "leasecheck.dbfixtures")


# ------------------------------------------------------------------------ collection


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if "leasecheck_shard" in metafunc.fixturenames:
        try:
            chosen = undertest.chosen_shards(config)
        except shards.ShardError:
            chosen = []  # reported once, as a usage error, when collection ends
        metafunc.parametrize("leasecheck_shard", chosen, ids=[s.id for s in chosen])
    if "leasecheck_gap" in metafunc.fixturenames:
        try:
            queue = undertest.load_queue(config)
        except undertest.Unusable:
            gaps = ["unknown: the queue could not be loaded"]
        else:
            gaps = contract.not_checked(queue)
            gaps += [
                f"{p}: excused (--leasecheck-excuse)" for p in sorted(undertest.excused(config))
            ]
            if not gaps:
                gaps = [f"nothing: {queue.name} declares nothing that rules a property out"]
        metafunc.parametrize("leasecheck_gap", gaps, ids=[g.split(":")[0] for g in gaps])
    if "leasecheck_regression" in metafunc.fixturenames:
        directory = undertest.regressions_dir(config)
        files: list[Path | None] = []
        if directory is not None and directory.is_dir():
            files = [*sorted(directory.glob("*.json"))]
        files = files or [None]
        ids = [f.stem if f else "none" for f in files]
        metafunc.parametrize("leasecheck_regression", files, ids=ids)


def _no_files_reason(config: pytest.Config) -> str | None:
    """Say why no failure file is replayed, when a directory was named (None otherwise:
    the suite's own skip says how to name one)."""
    directory = undertest.regressions_dir(config)
    if directory is None:
        return None
    if not directory.exists():
        return (
            f"leasecheck: the regressions directory {directory} does not exist yet: create "
            "it and commit failure files (.leasecheck/*.json) there to replay them on every run"
        )
    return (
        f"leasecheck: no failure files in {directory} yet: commit one there "
        "(.leasecheck/*.json) to replay it on every run"
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Load the queue and check the options, only if leasecheck's property tests were collected.

    A problem is one usage error: raised here without xdist, and handed to the
    controller by each xdist worker (a worker's error would print as a crash).
    `--collect-only` starts no server.
    """
    collect_only = bool(config.getoption("collectonly"))
    facts: dict[str, Any] = {"needs_server": dbplugin.needs_server(items) and not collect_only}
    suite = [item for item in items if _is_suite(item)]
    if suite:
        try:
            undertest.check_options(config)
            queue = undertest.load_queue(config)
            named = undertest.queue_spec(config)
            assert named is not None
            facts["queue"] = f"leasecheck: queue under test {queue.name!r} ({named[0]})"
            if undertest.excused(config):
                facts["queue"] += f"; not judged: {', '.join(sorted(undertest.excused(config)))}"
        except undertest.Unusable as exc:
            facts["error"] = str(exc)
        reason = _no_files_reason(config)
        for item in suite:
            if reason and _param(item, "leasecheck_regression", ...) is None:
                item.add_marker(pytest.mark.skip(reason=reason))
        if not collect_only:
            dbplugin.catch_signals(config)
    if hasattr(config, "workerinput"):
        if facts != {"needs_server": False}:
            dbplugin.report_collection(config, facts)
        return
    _act_on(config, facts)
    if suite and "queue" in facts and not collect_only:
        run_state(config).start(
            config, len([i for i in suite if i.name.startswith(PROPERTIES_TEST)])
        )
    if facts["needs_server"]:
        dbplugin.start_server(config)
        _probe_clock(config, facts)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Act on a worker's collection before xdist schedules its first test."""
    facts = dbplugin.collected_facts(node.config, node.gateway.id)
    _act_on(node.config, facts)
    if "queue" in facts:
        dbplugin.catch_signals(node.config)
        run_state(node.config).start(node.config, sum(f"::{PROPERTIES_TEST}[" in i for i in ids))
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
    queue = undertest.load_queue(config)
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
    return undertest.load_queue(pytestconfig)


@pytest.fixture(scope="session")
def leasecheck_installed_dsn(leasecheck_database: str, leasecheck_queue: contract.Queue) -> str:
    """Return a DSN for this worker's database with the harness and the queue installed."""
    clock.prepare(leasecheck_database, leasecheck_queue)
    return leasecheck_database


@dataclass(repr=False)
class _Harness(Harness):
    """The harness, shown without its pool (whose DSN may hold a password), counting
    examples, and leaving to the shard that told it a failure another shard shrinks too."""

    counted: Callable[[bool, str | None], None] | None = None
    """Told after each example: whether Hypothesis generated it (not shrinking), and the
    property of the failure being shrunk, if one is."""
    told: Callable[[], dict[str, str]] | None = None
    """The properties other shards of the run have told a failure of (and which shard)."""
    failing: str | None = None

    def __repr__(self) -> str:
        return f"Harness(queue={self.queue.name!r}, spec={self.spec!r})"

    def reset(self) -> None:
        super().reset()
        before, self.failing = self.failing, next(iter(self.recorder.last), None)
        if self.counted is not None:  # the machine resets once after every example
            self.counted(before is None and self.opening is None, self.failing)
        if self.told is not None and self.failing is not None:
            elsewhere = self.told()
            if self.failing in elsewhere:
                if self.opening is None:
                    what = f"stopped shrinking its {self.failing} failure"
                elif self.opening.startswith("small scope"):
                    what = f"its opening's {self.opening} broke {self.failing}"
                else:
                    what = f"its opening story {self.opening!r} broke {self.failing}"
                pytest.skip(
                    f"leasecheck: {what}: {elsewhere[self.failing]} told that property's "
                    "failure in full"
                )


@pytest.fixture
def leasecheck_harness(
    leasecheck_installed_dsn: str,
    leasecheck_queue: contract.Queue,
    pytestconfig: pytest.Config,
    request: pytest.FixtureRequest,
) -> Iterator[Harness]:
    """Return a harness on this worker's database, reset for a new run of the machine."""
    shard = _param(request.node, "leasecheck_shard")
    if shard is not None:
        not_after_a_contract_error(pytestconfig)
    named = undertest.queue_spec(pytestconfig)
    deadline = float(pytestconfig.getoption("--leasecheck-call-deadline"))
    pool = actors.Pool(
        leasecheck_installed_dsn,
        deadline=deadline,
        clients=contract.clients(leasecheck_queue),
    )
    harness = _Harness(
        queue=leasecheck_queue,
        pool=pool,
        excused=undertest.excused(pytestconfig),
        spec=undertest.recorded_spec(named[0], leasecheck_queue) if named else "",
        schedule=pytestconfig.getoption("--leasecheck-schedule"),
        isolation=pytestconfig.getoption("--leasecheck-isolation"),
        opens=pytestconfig.getoption("--leasecheck-opening") == "on",
        searches=profiles.SEARCHES[pytestconfig.getoption("--leasecheck-profile")],
        shrink=shrinking.Budget(
            profiles.shrinks(
                pytestconfig.getoption("--leasecheck-shrink"),
                pytestconfig.getoption("--leasecheck-profile"),
            )
        ),
    )
    harness.reset()
    if shard is not None:
        harness.counted = progress_of(pytestconfig).example
        harness.told = functools.partial(told_elsewhere, pytestconfig)
    try:
        yield harness
    finally:
        pool.close()
        if shard is not None:
            progress_of(pytestconfig).idle()


@pytest.fixture
def leasecheck_out(pytestconfig: pytest.Config) -> Iterator[Path]:
    """Return the directory failure files go to (created only when one is written; a
    directory leasecheck creates gets a `.gitignore` of `*`)."""
    out = out_dir(pytestconfig)
    existed = out_existed(pytestconfig)
    yield out
    if not existed:
        mark_as_ours(out)


@pytest.fixture
def leasecheck_budget(
    pytestconfig: pytest.Config,
    leasecheck_out: Path,
    leasecheck_queue: contract.Queue,
    request: pytest.FixtureRequest,
) -> settings:
    """Return the Hypothesis settings of the chosen profile, for this shard.

    With `--hypothesis-seed` the run is seeded (derandomized, each shard with a seed
    of its own derived from it, `leasecheck_shard.seed`); otherwise a profile that
    keeps failing examples keeps them under keys of this queue and this shard.
    """
    whole = profiles.budget(pytestconfig.getoption("--leasecheck-profile"), None)
    if undertest.forced_seed(pytestconfig) is not None:
        return settings(whole, derandomize=True, database=None)
    if whole.derandomize:
        return whole
    shard = _param(request.node, "leasecheck_shard")
    named = undertest.queue_spec(pytestconfig)
    scope = f"{named[0] if named else ''}|{leasecheck_queue.name}|{shard.id if shard else ''}"
    shared = pytestconfig.getoption("--leasecheck-examples-from")
    created = not out_existed(pytestconfig)
    examples = outdir.examples(leasecheck_out, scope, created, Path(shared) if shared else None)
    return settings(whole, database=examples)


def pytest_assertrepr_compare(
    config: pytest.Config, op: str, left: object, right: object
) -> list[str] | None:
    """Compare a DSN (`leasecheck_database`, ...) without showing its password: pytest's
    own explanation would diff the two strings, password and all."""
    if not isinstance(left, Dsn) and not isinstance(right, Dsn):
        return None
    return [f"{_shown(left)} {op} {_shown(right)}", "(leasecheck: a DSN's password is not shown)"]


def _shown(value: object) -> str:
    return repr(value)[:200]


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """In a run that names leasecheck's tests itself (`--pyargs leasecheck.suite`, as
    `leasecheck check` runs them), import the queue at once and catch SIGINT and SIGTERM
    from the start. Elsewhere the queue waits until the tests are collected."""
    config.pluginmanager.register(Reports(config), f"leasecheck-reports-{id(config)}")
    if SUITE in config.args and not hasattr(config, "workerinput"):
        try:
            undertest.load_queue(config)  # told before any xdist worker starts, not after
        except undertest.Unusable as exc:
            raise pytest.UsageError(str(exc)) from None
    if SUITE in config.args and not config.getoption("collectonly"):
        dbplugin.catch_signals(config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if RUN_KEY in config.stash:
        run_state(config).finish()
    if PROGRESS_KEY in config.stash:
        progress_of(config).flush()
    ran = RUN_KEY in config.stash or PROGRESS_KEY in config.stash
    if ran and not out_existed(config) and out_dir(config).is_dir():
        mark_as_ours(out_dir(config))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say what the property run exercised, per property (nothing if it did not run), and
    write the run's report where asked (`leasecheck.wing.runreport`)."""
    out = undertest.excused(config)
    exercised.hook(terminalreporter, config, out)
    named = undertest.queue_spec(config)
    runreport.hook(terminalreporter, config, named[0] if named else "", out)
