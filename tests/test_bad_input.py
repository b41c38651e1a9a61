"""Bad input gets one clear line that says how to fix it, and leaves nothing half-written.

Sessions: a child pytest with a bad option must stop with a usage error whose whole
output is one line naming the fix, and must leave no server and no database. Each
way into that line (server at session start, queue at configure time) runs as a
real child session; the other messages on the same path are checked by calling
the code that raises them, against real servers where a server is involved.
Queue calls: `tests/test_reference_queue.py` holds the NUL-payload, worker-name
and claim-lease tests (nothing inserted, nothing claimed); this file adds the
heartbeat lease, the form of every message, and the payload size.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import leasecheck.reference.queue
from leasecheck.dbfixtures import embedded, janitor, servers
from leasecheck.reference.queue import BadInput, ReferenceQueue
from leasecheck.stateful import contract
from tests import child

LEASE = timedelta(seconds=30)
_PASSWORD = secrets.token_hex(12)


@pytest.fixture(scope="module")
def password_server() -> Iterator[embedded.EmbeddedServer]:
    """Return a server of this module's own that checks passwords over TCP; stop it after."""
    server = embedded.start("leasecheck-pw-", password=_PASSWORD)
    try:
        yield server
    finally:
        server.stop()


def _closed_port() -> int:
    """Return a port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _session(tmp_path: Path, *args: str, test: str = "trivial", **env: str) -> child.Finished:
    """Run a child session of one test file with `args` (and `env`); check it left no
    server behind.

    `trivial` asks for a database; `suite` adopts leasecheck's property tests.
    """
    body = {
        "trivial": "def test_trivial(leasecheck_database):\n    pass\n",
        "suite": "from leasecheck.suite import *  # noqa: F403\n",
    }[test]
    (tmp_path / f"test_{test}.py").write_text(body)
    tmp = tmp_path / "tmp"
    argv = child.command(f"test_{test}.py", *args, rootdir=tmp_path)
    done = child.run(argv, tmp, cwd=tmp_path, timeout=child.TIMEOUT, **env)
    assert _ours(tmp) == [], "the session left files of a server behind"
    assert child.processes_under(tmp) == []
    return done


def _ours(tmp: Path) -> list[Path]:
    """Return what is in a child's TMPDIR besides pytest's own (xdist makes pytest-of-*)."""
    return [p for p in tmp.iterdir() if not p.name.startswith("pytest-of-")]


_XDIST = "bringing up nodes..."
"""xdist's own progress line, printed before any plugin knows what was collected."""


def _one_line(done: child.Finished, *fragments: str) -> str:
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.output
    lines = [line for line in done.lines if line != _XDIST]
    assert len(lines) == 1, done.output
    line = lines[0]
    assert line.startswith("ERROR: leasecheck: ")
    for fragment in fragments:
        assert fragment in line
    return line


def test_unreachable_server_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """--leasecheck-pg-dsn at a closed port: the reason and what to check, once, before any test."""
    dsn = f"host=127.0.0.1 port={_closed_port()} user=postgres dbname=postgres"
    _one_line(
        _session(tmp_path, "--leasecheck-pg-dsn", dsn),
        "cannot connect to PostgreSQL (dsn)",
        "Connection refused",
        "check the server is up and the DSN (--leasecheck-pg-dsn / LEASECHECK_DSN) is right",
    )


def test_wrong_password_stops_the_run_in_one_line(
    tmp_path: Path, password_server: embedded.EmbeddedServer
) -> None:
    """A server that checks passwords refuses a wrong one: one line, nothing created there."""
    dsn = password_server.tcp_dsn("postgres", "not-" + _PASSWORD)
    line = _one_line(
        _session(tmp_path, "--leasecheck-pg-dsn", dsn),
        'password authentication failed for user "postgres"',
        "check the server is up and the DSN",
    )
    assert _PASSWORD not in line
    assert janitor.leftovers(password_server.dsn) == []


def test_the_right_password_is_accepted(password_server: embedded.EmbeddedServer) -> None:
    """The password server is really usable, so the refusal above is about the password."""
    server = servers.from_dsn(password_server.tcp_dsn("postgres", _PASSWORD))
    assert server.version.startswith("18")


def test_malformed_dsn_stops_the_run_in_one_line_without_echoing_the_password(
    tmp_path: Path,
) -> None:
    """A DSN libpq cannot parse is named as such, with the two forms to write instead."""
    line = _one_line(
        _session(tmp_path, "--leasecheck-pg-dsn", "postgresql://me:hunter2@[::1"),
        "malformed DSN in --leasecheck-pg-dsn / LEASECHECK_DSN",
        "write it as 'postgresql://user:password@host:5432/dbname'",
    )
    assert "hunter2" not in line


def test_unknown_pg_value_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """An unknown --leasecheck-pg lists the choices."""
    _one_line(
        _session(tmp_path, "--leasecheck-pg=podman"),
        "unknown --leasecheck-pg value 'podman': use one of embedded, docker, dsn "
        "(or embedded-N for PostgreSQL N, e.g. embedded-15)",
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to `nobody`")
def test_a_tmpdir_closed_to_the_server_user_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """As root the embedded server runs as nobody, who cannot enter pytest's private tmpdirs."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    line = _one_line(
        _session(closed, "--leasecheck-pg=embedded"),
        "the embedded PostgreSQL did not start",
        "is closed to the user 'nobody' the server runs as",
        "set TMPDIR to a directory others may enter",
    )
    assert str(closed) in line or str(tmp_path) in line


def test_missing_queue_module_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """--leasecheck-queue at a module that does not exist: named, with where to look."""
    _one_line(
        _session(tmp_path, "--leasecheck-queue", "nosuchpkg.queue:Queue", test="suite"),
        "--leasecheck-queue 'nosuchpkg.queue:Queue': no module named 'nosuchpkg'",
        "check the spelling and that it is importable",
    )


def test_a_missing_regressions_directory_is_a_skip_that_says_so(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    """README's `leasecheck_regressions` line, before its directory exists: the regression
    test is skipped with the directory named and what to do, and the run goes on."""
    done = _session(
        tmp_path,
        "--leasecheck-queue",
        "leasecheck.reference.queue:ReferenceQueue",
        "--leasecheck-regressions",
        "no-such-dir",
        f"--leasecheck-pg-dsn={leasecheck_server_dsn}",
        "-k",
        "regression",
        "-rs",
        test="suite",
    )
    assert done.returncode == 0, done.output
    assert "1 skipped" in done.lines[-1], done.output
    assert "the regressions directory no-such-dir does not exist yet: create it" in done.output
    assert not (tmp_path / "no-such-dir").exists(), "a run creates no regressions directory"


def test_a_regressions_path_that_is_a_file_stops_the_run_in_one_line(tmp_path: Path) -> None:
    """A file where the directory should be is a mistake worth stopping for."""
    (tmp_path / "regressions.json").write_text("{}")
    _one_line(
        _session(
            tmp_path,
            "--leasecheck-queue",
            "leasecheck.reference.queue:ReferenceQueue",
            "--leasecheck-regressions",
            "regressions.json",
            test="suite",
        ),
        "the regressions directory regressions.json is a file",
    )


@pytest.mark.parametrize(
    ("given", "unknown"),
    [
        (["--leasecheck-excuse", "fencing,bogus"], "bogus"),
        (["--leasecheck-excuse", "fencing", "--leasecheck-excuse", "retry-cap, nope"], "nope"),
    ],
)
def test_an_unknown_property_in_an_excuse_list_is_named(
    tmp_path: Path, given: list[str], unknown: str
) -> None:
    """`--leasecheck-excuse a,b` is read as the environment variable is: each name is checked."""
    _one_line(
        _session(
            tmp_path,
            "--leasecheck-queue",
            "leasecheck.reference.queue:ReferenceQueue",
            *given,
            test="suite",
        ),
        f"--leasecheck-excuse {unknown}: no such property",
    )


@pytest.mark.parametrize(
    ("variable", "value", "choices"),
    [
        ("LEASECHECK_OPENING", "of", "on, off"),
        ("LEASECHECK_PROFILE", "fast", "ci, deep, dev"),
        ("LEASECHECK_SCHEDULE", "PCT", "random, pct, mixed"),
        ("LEASECHECK_ISOLATION", "serialisable", "read-committed, repeatable-read"),
    ],
)
def test_an_environment_value_outside_the_choices_is_named(
    tmp_path: Path, variable: str, value: str, choices: str
) -> None:
    """argparse checks an option's choices on the command line only: a variable's value
    is checked here, before any server starts (`LEASECHECK_OPENING=of` once ran the search
    alone, as if it said off)."""
    option = "--leasecheck-" + variable.removeprefix("LEASECHECK_").lower()
    queue = "--leasecheck-queue=leasecheck.reference.queue:ReferenceQueue"
    done = _session(tmp_path, queue, test="suite", **{variable: value})
    _one_line(done, f"${variable}={value!r} is not a value of {option}: set it to one of {choices}")


def test_an_excuse_list_excuses_each_property(tmp_path: Path) -> None:
    """Collected only (no server starts for --co): each property of the list is reported
    as not checked, as with the option repeated."""
    done = _session(
        tmp_path,
        "--leasecheck-queue",
        "leasecheck.reference.queue:ReferenceQueue",
        "--leasecheck-excuse",
        "fencing, retry-cap",
        "--co",
        test="suite",
    )
    assert done.returncode == 0, done.output
    assert "test_leasecheck_what_is_not_checked[fencing]" in done.output
    assert "test_leasecheck_what_is_not_checked[retry-cap]" in done.output
    assert "PostgreSQL" not in done.output, "--co started a server"


@pytest.mark.parametrize("n", ["0", "2"])
def test_property_tests_without_a_queue_stop_the_run_in_one_line(tmp_path: Path, n: str) -> None:
    """Outside leasecheck's repository nothing names the reference: no silent fallback,
    with or without xdist."""
    _one_line(
        _session(tmp_path, "-n", n, test="suite"),
        "leasecheck: no queue named; name the queue under test: pytest --leasecheck-queue",
        'leasecheck_queue = "module:attr" under [tool.pytest.ini_options]',
    )


def test_unrelated_tests_start_no_server_and_import_no_queue(tmp_path: Path) -> None:
    """A run of tests that use none of leasecheck's fixtures leaves it inert, even with a
    queue named that would not import."""
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    with child.scratch() as tmp:
        argv = child.command(
            "test_plain.py", "--leasecheck-queue", "nosuchpkg:Q", "-n", "2", rootdir=tmp_path
        )
        done = child.run(argv, tmp, cwd=tmp_path)
        assert done.returncode == 0, done.output
        assert "leasecheck" not in done.output
        assert _ours(tmp) == [], "something of leasecheck's was written or started"


@pytest.mark.parametrize(
    ("dsn", "fragment"),
    [
        ("host=localhost port", 'missing "=" after "port"'),
        ("postgresql://me:hunter2@[::1", "malformed DSN"),
        ("host=localhost passwordhunter2", 'missing "=" after "***"'),  # a password's "=" lost
        ("host=localhost password=hun ter2", 'missing "=" after "***"'),  # its tail after a space
        ("host=localhost pasword=hunter2", 'invalid connection option "pasword"'),
    ],
)
def test_malformed_dsns_are_named(dsn: str, fragment: str) -> None:
    """Each parse failure is one line that shows the fix and never the password."""
    with pytest.raises(servers.ServerUnavailable) as caught:
        servers.from_dsn(dsn)
    message = str(caught.value)
    assert fragment in message and "write it as" in message
    assert "\n" not in message and "hunter2" not in message and "ter2" not in message


def test_unknown_role_is_one_line(leasecheck_server_dsn: str) -> None:
    """A role the server does not know: the server's reason, in one line, and what to check."""
    role = f"lc_nosuch_{secrets.token_hex(4)}"
    with pytest.raises(servers.ServerUnavailable) as caught:
        servers.from_dsn(make_conninfo(leasecheck_server_dsn, user=role))
    message = str(caught.value)
    # A trusting server says the role does not exist; one that checks passwords says the
    # password failed for it. Either way the role is named, on one line.
    assert f'"{role}"' in message and "\n" not in message


def test_pg_dsn_source_without_a_dsn_is_one_line() -> None:
    """--leasecheck-pg=dsn alone says where the DSN goes."""
    with pytest.raises(
        servers.ServerUnavailable,
        match=r"--leasecheck-pg=dsn needs --leasecheck-pg-dsn or LEASECHECK_DSN",
    ):
        servers.resolve("dsn", None, "postgres:18")


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("leasecheck.reference.queue", "is not of the form module:attr"),
        (
            "leasecheck.reference.queue:NoSuchQueue",
            "module leasecheck.reference.queue has no attribute 'NoSuchQueue'",
        ),
        ("collections:OrderedDict", "without the contract's members: name, max_attempts"),
    ],
)
def test_unusable_queue_impls_are_named(spec: str, fragment: str) -> None:
    """Each way a queue's name can miss is one line naming what is missing."""
    with pytest.raises(contract.ContractError) as caught:
        contract.load(spec)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_a_factory_that_raises_is_named() -> None:
    """A zero-argument factory that fails (here json.dumps, which needs an argument)."""
    with pytest.raises(
        contract.ContractError, match=r"json:dumps.*calling dumps\(\) failed"
    ) as caught:
        contract.load("json:dumps")
    assert "\n" not in str(caught.value)


def test_non_positive_heartbeat_lease_is_refused_and_changes_nothing(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """A heartbeat with a zero lease would end the owner's lease at once: refused before SQL."""
    queue.enqueue(db, {})
    owner = queue.claim(db, "w", LEASE)
    assert owner is not None
    before = queue.job(db, int(owner.job_id))
    with pytest.raises(BadInput, match="lease must be positive"):
        queue.heartbeat(db, owner, timedelta(0))
    assert queue.job(db, int(owner.job_id)) == before


@pytest.fixture
def queue() -> ReferenceQueue:
    """Return the reference queue with its default cap."""
    return ReferenceQueue()


_BAD_CALLS: dict[str, Callable[[ReferenceQueue, psycopg.Connection[Any]], object]] = {
    "nul-payload": lambda q, c: q.enqueue(c, {"note": "a\x00b"}),
    "empty-worker": lambda q, c: q.claim(c, "", LEASE),
    "blank-worker": lambda q, c: q.claim(c, " \t", LEASE),
    "long-worker": lambda q, c: q.claim(c, "w" * 10_000, LEASE),
    "zero-lease": lambda q, c: q.claim(c, "w", timedelta(0)),
    "negative-lease": lambda q, c: q.claim(c, "w", timedelta(seconds=-1)),
    "zero-cap": lambda q, c: ReferenceQueue(max_attempts=0),
}


@pytest.mark.parametrize("call", list(_BAD_CALLS))
def test_each_refusal_is_one_line_that_names_the_fix(
    db: psycopg.Connection[Any], queue: ReferenceQueue, call: str
) -> None:
    """Every BadInput message is one line with a colon before what to do instead."""
    with pytest.raises(BadInput) as caught:
        _BAD_CALLS[call](queue, db)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 200
    assert ":" in message or "at least" in message


def test_huge_payload_is_refused_and_nothing_is_inserted(
    db: psycopg.Connection[Any], queue: ReferenceQueue
) -> None:
    """A payload over the queue's stated limit is refused before it reaches the server."""
    limit = getattr(leasecheck.reference.queue, "MAX_PAYLOAD_BYTES", None)
    if limit is None:
        pytest.skip(
            "leasecheck.reference.queue states no payload limit (MAX_PAYLOAD_BYTES): jsonb "
            "takes up to 255 MB, so no test here can afford to reach one"
        )
    payload = {"blob": "x" * (int(limit) + 1)}
    assert len(json.dumps(payload)) > limit
    with pytest.raises(BadInput, match="payload"):
        queue.enqueue(db, payload)
    row = db.execute("select count(*) from jobs").fetchone()
    assert row is not None and row[0] == 0
