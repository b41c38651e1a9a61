"""The witness runner against a real PostgreSQL, with tiny scripts and no library.

Each script gets a fresh, empty database, prints its steps and ends with the
convention's verdict line; the runner reads the exit status and that line, and the
report shows the cell as witnessed or model only.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from matrix import report, witness
from matrix.runs import Verdicts
from matrix.targets import Target

TARGET = Target("tiny", "tests.nowhere:Queue")
PROP = "single-completion"
PYTHON = Path(sys.executable)

REPRODUCES = """
import sys
import psycopg

with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    name = conn.execute("select current_database()").fetchone()[0]
    tables = conn.execute("select count(*) from pg_tables where schemaname = 'public'")
    print(f"database {name}: {tables.fetchone()[0]} tables")
    conn.execute("create table done (job int)")
    conn.execute("insert into done values (1)")
    print("complete job1 as w0 -> accepted")
    conn.execute("insert into done values (1)")
    print("complete job1 as w1 -> accepted")
    rows = conn.execute("select count(*) from done where job = 1").fetchone()[0]
    print(f"done rows for job1: {rows}")
    if rows == 2:
        print("WITNESSED: job1 was completed twice")
        sys.exit(0)
    print("NOT REPRODUCED: job1 was completed once")
    sys.exit(1)
"""


def _scripts(tmp_path: Path, body: str) -> Path:
    """Write `body` as the tiny target's witness for PROP; return the scripts directory."""
    scripts = tmp_path / "witnesses"
    script = witness.script_for(TARGET.name, PROP, scripts)
    script.parent.mkdir(parents=True)
    script.write_text(textwrap.dedent(body))
    return scripts


def _exists(server_dsn: str, name: str) -> bool:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        found = conn.execute("select 1 from pg_database where datname = %s", [name]).fetchone()
    return found is not None


def test_a_reproduced_violation_is_witnessed(leasecheck_server_dsn: str, tmp_path: Path) -> None:
    """Exit 0 with WITNESSED: on a fresh empty database, dropped afterwards."""
    scripts = _scripts(tmp_path, REPRODUCES)
    found = witness.check(PYTHON, TARGET, PROP, leasecheck_server_dsn, scripts)
    assert found.verdict == witness.WITNESSED, found
    assert found.note == "WITNESSED: job1 was completed twice"
    assert found.output is not None and "complete job1 as w1 -> accepted" in found.output
    first = found.output.splitlines()[0]
    assert first.endswith(": 0 tables")
    assert not _exists(leasecheck_server_dsn, first.split()[1].rstrip(":"))


def test_a_violation_that_does_not_reproduce_is_model_only(
    leasecheck_server_dsn: str, tmp_path: Path
) -> None:
    """The same script where the second completion is refused: exit 1, NOT REPRODUCED."""
    body = REPRODUCES.replace(
        'conn.execute("insert into done values (1)")\n    print("complete job1 as w1',
        'print("complete job1 as w1 -> refused")\n    print("complete job1 as w1',
    )
    assert body != REPRODUCES
    found = witness.check(PYTHON, TARGET, PROP, leasecheck_server_dsn, _scripts(tmp_path, body))
    assert found.verdict == witness.MODEL_ONLY
    assert found.note == "NOT REPRODUCED: job1 was completed once"


def test_no_script_is_model_only(leasecheck_server_dsn: str, tmp_path: Path) -> None:
    """Without a script there is nothing to run, and the note says so."""
    found = witness.check(PYTHON, TARGET, PROP, leasecheck_server_dsn, tmp_path / "none")
    assert found.verdict == witness.MODEL_ONLY and found.output is None
    assert found.note.startswith("no witness script")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("print('WITNESSED: but it crashed')\nraise SystemExit(3)\n", "exited 3"),
        ("print('all fine')\n", "exited 0 without its verdict line"),
        ("raise RuntimeError('boom')\n", "exited 1 without its verdict line"),
    ],
)
def test_a_script_without_its_verdict_is_not_a_witness(
    leasecheck_server_dsn: str, tmp_path: Path, body: str, says: str
) -> None:
    """Only exit 0 with WITNESSED counts; a crash or a silent exit is model only."""
    found = witness.check(PYTHON, TARGET, PROP, leasecheck_server_dsn, _scripts(tmp_path, body))
    assert found.verdict == witness.MODEL_ONLY
    assert says in found.note


def test_a_script_that_hangs_is_stopped(leasecheck_server_dsn: str, tmp_path: Path) -> None:
    """A script past its timeout is killed and the cell stays model only."""
    scripts = _scripts(tmp_path, "import time\nprint('waiting', flush=True)\ntime.sleep(60)\n")
    found = witness.check(PYTHON, TARGET, PROP, leasecheck_server_dsn, scripts, timeout=2)
    assert found.verdict == witness.MODEL_ONLY and "timed out" in found.note


def test_the_report_shows_both_kinds(leasecheck_server_dsn: str, tmp_path: Path) -> None:
    """Witnessed cells link the script and its saved output; model-only cells carry a note."""
    scripts = _scripts(tmp_path, REPRODUCES)
    witnessed = witness.check(PYTHON, TARGET, PROP, leasecheck_server_dsn, scripts)
    verdicts = Verdicts(violated={PROP: [], "fencing": []})
    column = report.Column(
        TARGET,
        None,
        verdicts,
        1.0,
        {
            PROP: witnessed,
            "fencing": witness.Witness(
                witness.MODEL_ONLY, "NOT REPRODUCED: the stale call was refused"
            ),
        },
    )
    out = tmp_path / "results"
    saved = witness.save(column.witnesses, TARGET.name, out)
    assert saved == {PROP: f"witnesses/tiny/{PROP}.txt"}
    assert "WITNESSED" in (out / saved[PROP]).read_text()
    meta = {"date": "today", "postgres": "18", "profile": "ci", "python": "3", "seconds": 1.0}
    cells = json.loads(report.as_json([column], meta, [{}], out))["implementations"][0]
    single = cells["properties"][PROP]
    assert single["verdict"] == "violated (witnessed)"
    assert single["witness"]["script"] == f"../witnesses/tiny/{PROP}.py"
    assert single["witness"]["output"] == saved[PROP]
    assert cells["properties"]["fencing"]["verdict"] == "violated (model only)"
    page = report.as_markdown([column], meta, [{}], out)
    assert f"**violated (witnessed)** witness: [py](../witnesses/tiny/{PROP}.py)" in page
    assert f"[output](witnesses/tiny/{PROP}.txt)" in page
    assert "violated (model only) [1]" in page
    assert "tiny: fencing: model only: NOT REPRODUCED: the stale call was refused" in page


def test_the_command_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    """By hand: an unknown column or a cell without a script is a one-line usage error."""
    assert witness.main(["no-such-column", PROP]) == 2
    assert "no such implementation" in capsys.readouterr().err
    assert witness.main(["reference", PROP]) == 2
    assert "no witness script at" in capsys.readouterr().err
