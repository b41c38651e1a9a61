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

import contextlib
import hashlib
import inspect
import json
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from leasecheck import exercised, shards
from leasecheck.adapters.sqlfile_queue import SqlFileQueue
from leasecheck.dbfixtures import janitor
from leasecheck.dbfixtures import plugin as dbplugin
from leasecheck.dbfixtures.redact import Dsn
from leasecheck.stateful import actors, clock, contract, probe, profiles, properties
from leasecheck.stateful.machine import Harness
from leasecheck.stateful.properties import PropertyViolated

SUITE = "leasecheck.suite"
SQL_QUEUE = "leasecheck.adapters.sqlfile_queue:from_env"
SQL_SPEC = "sql:"
"""How a failure of a `.sql` queue named through `$LEASECHECK_SQL_QUEUE` records it:
`sql:PATH`, which `leasecheck replay` loads without the variable."""
QUEUE_HELP = (
    "name the queue under test: pytest --leasecheck-queue module:attr, "
    'LEASECHECK_QUEUE=module:attr, or leasecheck_queue = "module:attr" under '
    "[tool.pytest.ini_options] in pyproject.toml"
)
PROPERTIES_TEST = "test_leasecheck_properties"
REGRESSION_TEST = "test_leasecheck_regression"
PROGRESS_EVERY = 10.0
"""Seconds between two progress lines of a property run."""
GITIGNORE = "*\n"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Bring in the database half of the plugin (servers and databases) with this one."""
    if not pluginmanager.is_registered(dbplugin):
        pluginmanager.register(dbplugin, "leasecheck.dbfixtures")


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
        "--leasecheck-regressions",
        metavar="DIR",
        help="replay every failure file (*.json) in DIR as a test of its own (default: "
        "the leasecheck_regressions ini option; a DIR not made yet is a skip that says so)",
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
    fixed_args, fixed_addopts = _equals_form(args, names), _equals_form(addopts, names)
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


def _equals_form(args: Sequence[str], names: set[str]) -> list[str]:
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


def recorded_spec(spec: str, queue: contract.Queue) -> str:
    """Return how a failure file records the queue: its spec, or `sql:PATH` for a `.sql`
    queue named through `$LEASECHECK_SQL_QUEUE` (the variable is not in the file)."""
    if spec != SQL_QUEUE or not isinstance(queue, SqlFileQueue):
        return spec
    path = queue.path.resolve()
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f"{SQL_SPEC}{path}"


def excused(config: pytest.Config) -> frozenset[str]:
    """Return the properties `--leasecheck-excuse` takes out of judgement (each option
    may be a comma-separated list, as $LEASECHECK_EXCUSE is)."""
    given: list[str] = config.getoption("--leasecheck-excuse") or []
    return frozenset(p.strip() for value in given for p in value.split(",") if p.strip())


def _check_options(config: pytest.Config) -> None:
    unknown = sorted(excused(config) - set(properties.ALL))
    if unknown:
        raise Unusable(
            f"leasecheck: --leasecheck-excuse {', '.join(unknown)}: no such property; "
            f"choose from {', '.join(properties.ALL)}"
        )
    regressions = _regressions_dir(config)
    if regressions is not None and regressions.exists() and not regressions.is_dir():
        raise Unusable(
            f"leasecheck: the regressions directory {regressions} is a file; name a "
            "directory in --leasecheck-regressions / leasecheck_regressions"
        )
    try:
        _shards(config)
    except shards.ShardError as exc:
        raise Unusable(f"leasecheck: {exc}") from None


def _regressions_dir(config: pytest.Config) -> Path | None:
    option = config.getoption("--leasecheck-regressions")
    if option:
        return Path(option)
    ini: list[Path] = config.getini("leasecheck_regressions")
    return ini[0] if ini else None


def _forced_seed(config: pytest.Config) -> object | None:
    """Return `--hypothesis-seed`, if given (None without Hypothesis's pytest plugin)."""
    forced: object | None = config.getoption("--hypothesis-seed", None)
    return forced


def _shards(config: pytest.Config) -> list[shards.Shard]:
    return shards.select(
        config.getoption("--leasecheck-shards"),
        shards.parse_slice(config.getoption("--leasecheck-shard")),
        _forced_seed(config),
    )


# ------------------------------------------------------------------------ collection


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    config = metafunc.config
    if "leasecheck_shard" in metafunc.fixturenames:
        try:
            chosen = _shards(config)
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
        files: list[Path | None] = []
        if directory is not None and directory.is_dir():
            files = [*sorted(directory.glob("*.json"))]
        files = files or [None]
        ids = [f.stem if f else "none" for f in files]
        metafunc.parametrize("leasecheck_regression", files, ids=ids)


def _is_suite(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    return getattr(function, "__module__", None) == SUITE


def _no_files_reason(config: pytest.Config) -> str | None:
    """Say why no failure file is replayed, when a directory was named (None otherwise:
    the suite's own skip says how to name one)."""
    directory = _regressions_dir(config)
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
            _check_options(config)
            queue = _load_queue(config)
            named = queue_spec(config)
            assert named is not None
            facts["queue"] = f"leasecheck: queue under test {queue.name!r} ({named[0]})"
            if excused(config):
                facts["queue"] += f"; not judged: {', '.join(sorted(excused(config)))}"
        except Unusable as exc:
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
        _run(config).start(config, len([i for i in suite if i.name.startswith(PROPERTIES_TEST)]))
    if facts["needs_server"]:
        dbplugin.start_server(config)
        _probe_clock(config, facts)


def _param(item: pytest.Item, name: str, default: Any = None) -> Any:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(name, default) if callspec is not None else default


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Act on a worker's collection before xdist schedules its first test."""
    facts = dbplugin.collected_facts(node.config, node.gateway.id)
    _act_on(node.config, facts)
    if "queue" in facts:
        dbplugin.catch_signals(node.config)
        _run(node.config).start(node.config, sum(f"::{PROPERTIES_TEST}[" in i for i in ids))
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


# --------------------------------------------------------- the failure directory


_out_existed_key = pytest.StashKey[bool]()
_OUT_EXISTED = "leasecheck_out_existed"


def _out_dir(config: pytest.Config) -> Path:
    return Path(config.getoption("--leasecheck-dir"))


def _out_existed(config: pytest.Config) -> bool:
    """Return whether the failure directory was there before this run (the user's, then)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and _OUT_EXISTED in workerinput:
        return bool(workerinput[_OUT_EXISTED])
    if _out_existed_key not in config.stash:
        config.stash[_out_existed_key] = _out_dir(config).exists()
    return config.stash[_out_existed_key]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each xdist worker whether the failure directory was there before the run."""
    node.workerinput[_OUT_EXISTED] = _out_existed(node.config)


def mark_as_ours(directory: Path) -> None:
    """Put a `.gitignore` of `*` in a failure directory leasecheck created, once."""
    ignore = directory / ".gitignore"
    if directory.is_dir() and not ignore.exists():
        with contextlib.suppress(OSError):
            ignore.write_text(GITIGNORE)


class _ExamplesOf(ExampleDatabase):
    """The failure directory's example database, with keys of one queue and one shard.

    Hypothesis keys a state machine's examples by the factory's source, which is
    the same for every shard and every queue: without this, one shard's failure
    would be replayed by all of them and every queue sharing a directory.
    """

    def __init__(self, out: Path, scope: str, created: bool) -> None:
        super().__init__()
        self.out = out
        self.inner = DirectoryBasedExampleDatabase(out / "examples")
        self.scope = hashlib.sha256(scope.encode()).hexdigest()[:16].encode() + b":"
        self.created = created

    def __repr__(self) -> str:
        return f"leasecheck examples in {self.inner.path} ({self.scope.decode()[:-1]})"

    def _writing(self) -> None:
        if not self.out.exists():
            self.created = True
        self.out.mkdir(parents=True, exist_ok=True)
        if self.created:
            mark_as_ours(self.out)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self.inner.fetch(self.scope + key)

    def save(self, key: bytes, value: bytes) -> None:
        self._writing()
        self.inner.save(self.scope + key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.scope + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._writing()
        self.inner.move(self.scope + src, self.scope + dest, value)


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


@dataclass(repr=False)
class _Harness(Harness):
    """The harness, shown without its pool (whose DSN may hold a password), counting examples."""

    counted: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"Harness(queue={self.queue.name!r}, spec={self.spec!r})"

    def reset(self) -> None:
        super().reset()
        if self.counted is not None:
            self.counted()  # the machine resets once after every example


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
        _not_after_a_contract_error(pytestconfig)
    named = queue_spec(pytestconfig)
    pool = actors.Pool(leasecheck_installed_dsn)
    harness = _Harness(
        queue=leasecheck_queue,
        pool=pool,
        excused=excused(pytestconfig),
        spec=recorded_spec(named[0], leasecheck_queue) if named else "",
    )
    harness.reset()
    if shard is not None:
        harness.counted = _progress(pytestconfig).example
    try:
        yield harness
    finally:
        pool.close()


@pytest.fixture
def leasecheck_out(pytestconfig: pytest.Config) -> Iterator[Path]:
    """Return the directory failure files go to (created only when one is written; a
    directory leasecheck creates gets a `.gitignore` of `*`)."""
    out = _out_dir(pytestconfig)
    existed = _out_existed(pytestconfig)
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
    if _forced_seed(pytestconfig) is not None:
        return settings(whole, derandomize=True, database=None)
    if whole.derandomize:
        return whole
    shard = _param(request.node, "leasecheck_shard")
    named = queue_spec(pytestconfig)
    scope = f"{named[0] if named else ''}|{leasecheck_queue.name}|{shard.id if shard else ''}"
    examples = _ExamplesOf(leasecheck_out, scope, created=not _out_existed(pytestconfig))
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
    report.longrepr = text
    headline = next((line for line in text.splitlines() if _PROP.match(line)), text.splitlines()[0])
    info = {"kind": kind, "key": key, "line": headline, "props": _told(text)}
    report.leasecheck = info  # type: ignore[attr-defined]
    if kind == _CONTRACT:
        _remember_contract_error(item.config, item.name, text.splitlines()[0])
    return report


_contract_key = pytest.StashKey[dict[str, str]]()


def _remember_contract_error(config: pytest.Config, test: str, line: str) -> None:
    """Leave word that the queue broke the contract, so shards not yet begun are not run."""
    found = {"test": test.split("[")[-1].rstrip("]"), "line": line}
    config.stash.setdefault(_contract_key, found)
    shared = dbplugin.run_dir(config)
    if shared is not None and not (shared / "contract.json").exists():
        with contextlib.suppress(OSError):
            dbplugin.write_shared(shared / "contract.json", found)


def _not_after_a_contract_error(config: pytest.Config) -> None:
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
class _Progress:
    """What this process's shards have done, written where the controller reads it."""

    config: pytest.Config
    examples: int = 0
    written: float = 0.0

    def example(self) -> None:
        self.examples += 1
        shared = dbplugin.run_dir(self.config)
        if shared is None or not hasattr(self.config, "workerinput"):
            return
        now = time.monotonic()
        if now - self.written >= 1.0:
            self.written = now
            self.flush()

    def flush(self) -> None:
        shared = dbplugin.run_dir(self.config)
        workerinput = getattr(self.config, "workerinput", None)
        if shared is not None and workerinput is not None:
            with contextlib.suppress(OSError):
                path = shared / f"progress-{workerinput['workerid']}.json"
                dbplugin.write_shared(path, {"examples": self.examples})


_progress_key = pytest.StashKey[_Progress]()


def _progress(config: pytest.Config) -> _Progress:
    if _progress_key not in config.stash:
        config.stash[_progress_key] = _Progress(config)
    return config.stash[_progress_key]


@dataclass
class _RunState:
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
                writer = getattr(reporter, "_tw", None)
                if getattr(writer, "width_of_current_line", 0):
                    reporter.write("\n")  # after xdist's progress characters
                reporter.write_line(self.line(config))
            if len(self.done) >= self.shards:
                return

    def examples(self, config: pytest.Config) -> int:
        total = _progress(config).examples
        shared = dbplugin.run_dir(config)
        if shared is not None:
            for path in shared.glob("progress-*.json"):
                with contextlib.suppress(OSError, ValueError):
                    total += int(json.loads(path.read_text())["examples"])
        return total

    def line(self, config: pytest.Config) -> str:
        seconds = time.monotonic() - self.started
        examples = f"{self.examples(config):,} examples run"
        props = sorted({p for told in self.broken.values() for p in told.split(",")})
        found = (
            f"{len(self.broken)} violation{'s' if len(self.broken) != 1 else ''} so far "
            f"({', '.join(props)})"
            if self.broken
            else "no violation so far"
        )
        return (
            f"leasecheck: {seconds:.0f} s: {examples}, {len(self.done)}/{self.shards} "
            f"shards done, {found}"
        )

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)


_run_key = pytest.StashKey[_RunState]()


def _run(config: pytest.Config) -> _RunState:
    if _run_key not in config.stash:
        config.stash[_run_key] = _RunState()
    return config.stash[_run_key]


class _Reports:
    """In the process that prints (the controller under xdist), report each failure of
    leasecheck's once: a failure several shards found, or a contract error every shard
    met, is told in full by the first and in one line by the others; and count what
    the progress line says."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        config = self.config
        if hasattr(config, "workerinput") or _run_key not in config.stash:
            return
        state = _run(config)
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


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Catch SIGINT and SIGTERM from the start of a run that names leasecheck's tests itself
    (`--pyargs leasecheck.suite`, as `leasecheck check` runs them)."""
    config.pluginmanager.register(_Reports(config), f"leasecheck-reports-{id(config)}")
    if SUITE in config.args and not config.getoption("collectonly"):
        dbplugin.catch_signals(config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if _run_key in config.stash:
        _run(config).finish()
    if _progress_key in config.stash:
        _progress(config).flush()
    ran = _run_key in config.stash or _progress_key in config.stash
    if ran and not _out_existed(config) and _out_dir(config).is_dir():
        mark_as_ours(_out_dir(config))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Say what the property run exercised, per property (nothing if it did not run)."""
    exercised.hook(terminalreporter, config)
