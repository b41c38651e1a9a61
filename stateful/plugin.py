"""pytest plugin: choose the queue under test and the Hypothesis profile.

`--queue-impl module:attr` (or $LEASECHECK_QUEUE) names the implementation; a
wrong one stops the run once with one line saying what is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from dbfixtures import janitor
from stateful import clock, contract, profiles, properties

DEFAULT_IMPL = "reference.queue:ReferenceQueue"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leasecheck")
    group.addoption(
        "--queue-impl",
        default=os.environ.get("LEASECHECK_QUEUE", DEFAULT_IMPL),
        help=f"the queue under test as module:attr (default: $LEASECHECK_QUEUE or {DEFAULT_IMPL})",
    )
    group.addoption(
        "--excuse",
        action="append",
        default=[p for p in os.environ.get("LEASECHECK_EXCUSE", "").split(",") if p],
        metavar="PROPERTY",
        help="stop judging this property (repeatable; $LEASECHECK_EXCUSE, comma-separated); "
        "the release matrix uses it to find the next violation after the first",
    )
    group.addoption(
        "--leasecheck-dir",
        default=os.environ.get("LEASECHECK_DIR", ".leasecheck"),
        metavar="DIR",
        help="where a failing run writes its histories and timelines (default: .leasecheck)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    profiles.register()
    if config.option.help:
        return
    try:
        config.stash[_queue_key] = contract.load(config.getoption("--queue-impl"))
    except contract.ContractError as exc:
        raise pytest.UsageError(f"leasecheck: {exc}") from None
    unknown = sorted(set(config.getoption("--excuse")) - set(properties.ALL))
    if unknown:
        raise pytest.UsageError(
            f"leasecheck: --excuse {', '.join(unknown)}: no such property; "
            f"choose from {', '.join(properties.ALL)}"
        )


def pytest_report_header(config: pytest.Config) -> str | None:
    queue = config.stash.get(_queue_key, None)
    if queue is None:
        return None
    line = f"leasecheck: queue under test {queue.name!r} ({config.getoption('--queue-impl')})"
    if excused(config):
        line += f"; not judged (--excuse): {', '.join(sorted(excused(config)))}"
    return line


_queue_key = pytest.StashKey[contract.Queue]()


def queue_under_test(config: pytest.Config) -> contract.Queue:
    """Return the queue `--queue-impl` names (loaded once, at configure time)."""
    return config.stash[_queue_key]


def excused(config: pytest.Config) -> frozenset[str]:
    """Return the properties `--excuse` takes out of judgement."""
    return frozenset(config.getoption("--excuse"))


@pytest.fixture(scope="session")
def queue_impl(pytestconfig: pytest.Config) -> contract.Queue:
    """Return the queue under test, as `--queue-impl` names it."""
    return pytestconfig.stash[_queue_key]


@pytest.fixture(scope="session")
def installed_dsn(pg_database: str, queue_impl: contract.Queue) -> str:
    """Return a DSN for this worker's database with the harness and the queue installed."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        clock.install(conn)
        clock.use_simulated_time(conn)
        queue_impl.install(conn)
    return pg_database


@pytest.fixture(scope="session")
def reference_schema_dsn(pg_server_dsn: str, worker_id_label: str) -> Iterator[str]:
    """Return a DSN for a database of this worker's own with the reference schema installed.

    The mutants share the reference queue's schema, so their kill tests run here
    whatever `--queue-impl` says.
    """
    with janitor.temporary(pg_server_dsn, f"{worker_id_label}_ref") as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            clock.install(conn)
            clock.use_simulated_time(conn)
            contract.load(DEFAULT_IMPL).install(conn)
        yield dsn


@pytest.fixture
def db(installed_dsn: str, queue_impl: contract.Queue) -> Iterator[psycopg.Connection[Any]]:
    """Return an autocommit connection on simulated time, with the queue and clock reset."""
    with clock.connect(installed_dsn) as conn:
        queue_impl.reset(conn)
        clock.reset(conn)
        yield conn
