"""The queue under test, and what the run's options ask of it.

Read by the plugin's hooks and fixtures, and by `leasecheck check` and `replay`: which
queue the run names and where, how a failure file records it, which properties are
excused, which shards this process searches, and whether the options can be taken at
all (`Unusable` carries the one line a run that cannot start shows).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from leasecheck.adapters.sqlfile_queue import SqlFileQueue
from leasecheck.stateful import contract, properties
from leasecheck.stateful.engine import profiles
from leasecheck.wing import campaign, shards
from leasecheck.wing.options import from_environment_unchosen

SQL_QUEUE = "leasecheck.adapters.sqlfile_queue:from_env"
SQL_SPEC = "sql:"
"""How a failure of a `.sql` queue named through `$LEASECHECK_SQL_QUEUE` records it:
`sql:PATH`, which `leasecheck replay` loads without the variable."""
QUEUE_HELP = (
    "name the queue under test: pytest --leasecheck-queue module:attr, "
    'LEASECHECK_QUEUE=module:attr, or leasecheck_queue = "module:attr" under '
    "[tool.pytest.ini_options] in pyproject.toml"
)


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


def load_queue(config: pytest.Config) -> contract.Queue:
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


def check_options(config: pytest.Config) -> None:
    """Raise Unusable, with the one line to show, for options the run cannot take."""
    unchosen = from_environment_unchosen(config.getoption)
    if unchosen is not None:
        raise Unusable(unchosen)
    unknown = sorted(excused(config) - set(properties.ALL))
    if unknown:
        raise Unusable(
            f"leasecheck: --leasecheck-excuse {', '.join(unknown)}: no such property; "
            f"choose from {', '.join(properties.ALL)}"
        )
    regressions = regressions_dir(config)
    if regressions is not None and regressions.exists() and not regressions.is_dir():
        raise Unusable(
            f"leasecheck: the regressions directory {regressions} is a file; name a "
            "directory in --leasecheck-regressions / leasecheck_regressions"
        )
    try:
        chosen_shards(config)
    except shards.ShardError as exc:
        raise Unusable(f"leasecheck: {exc}") from None
    shared = config.getoption("--leasecheck-examples-from")
    if shared:
        derandomized = (
            forced_seed(config) is not None
            or profiles.budget(config.getoption("--leasecheck-profile"), None).derandomize
        )
        try:
            campaign.usable_examples(Path(shared), derandomized=derandomized)
        except campaign.CampaignError as exc:
            raise Unusable(f"leasecheck: {exc}") from None


def regressions_dir(config: pytest.Config) -> Path | None:
    """Return the directory of committed failures to replay, if one is named."""
    option = config.getoption("--leasecheck-regressions")
    if option:
        return Path(option)
    ini: list[Path] = config.getini("leasecheck_regressions")
    return ini[0] if ini else None


def forced_seed(config: pytest.Config) -> object | None:
    """Return `--hypothesis-seed`, if given (None without Hypothesis's pytest plugin)."""
    forced: object | None = config.getoption("--hypothesis-seed", None)
    return forced


def chosen_shards(config: pytest.Config) -> list[shards.Shard]:
    """Return the shards this process searches (`--leasecheck-shards`, `--leasecheck-shard`)."""
    return shards.select(
        config.getoption("--leasecheck-shards"),
        shards.parse_slice(config.getoption("--leasecheck-shard")),
        forced_seed(config),
    )
