"""`python -m matrix --only NAME` merges its columns into the results already written.

The column run replaces its own (or takes its place in the table's order), every other
column stays byte for byte in the JSON, the run's header is kept apart and named on
the page, and the page is re-rendered from the merged JSON. One test runs the matrix
itself on the reference queue (the `dev` budget) into a directory of older results.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest

from leasecheck.stateful.properties import ALL
from matrix import __main__ as cli
from matrix import markdown, merge, report, targets, unreached, witness
from matrix.runs import Verdicts
from matrix.targets import Target
from tests.test_matrix_runs import SEARCH_ONLY, _summary

OLDER = Path(__file__).resolve().parent / "data" / "older" / "conformance-pg15.json"
"""Results written before the matrix kept counts (PostgreSQL 15.18: reference,
reference.sql, graphile-worker-0.18.0 and 0.13.0, pgboss-12.38.0)."""
META = {"date": "later", "postgres": "15.19", "profile": "ci", "python": "3", "seconds": 9.96}
COMMAND = "python -m matrix --only reference --pg 15"


def _run(name: str, queue: str = "leasecheck.reference.queue:ReferenceQueue") -> dict[str, Any]:
    """Return the data of a run of one column, with counts, as `report.as_data` makes it."""
    counts = {p: 3 for p in ALL}
    column = report.Column(
        Target(name, queue), None, Verdicts(holds=list(ALL), runs=1, exercised=counts), 4.0
    )
    return report.as_data([column], META, [{}])


def _block(impl: dict[str, Any]) -> str:
    """Return one column's text as it stands in a results file (`report.dumps`)."""
    return textwrap.indent(json.dumps(impl, indent=1), "  ")


def test_a_column_run_replaces_its_own_and_keeps_the_others_byte_for_byte() -> None:
    text = OLDER.read_text()
    previous = merge.load(OLDER, "15.19")
    assert previous is not None and report.dumps(previous) == text
    run = _run("reference")
    merged = merge.merge(previous, run, COMMAND)
    out = report.dumps(merged)
    old_names = [i["name"] for i in previous["implementations"]]
    assert [i["name"] for i in merged["implementations"]] == old_names
    for impl in previous["implementations"][1:]:
        assert _block(impl) in text and _block(impl) in out
    assert merged["implementations"][0] == run["implementations"][0]
    assert _block(previous["implementations"][0]) not in out
    # Nothing else changed: the header is the first run's (with the properties the run
    # judges that it did not know, in the run's order), the merged run's is kept apart.
    expected = json.loads(text)
    assert {p: merged["properties"][p] for p in expected["properties"]} == expected["properties"]
    expected["properties"] = merged["properties"]
    expected["implementations"][0] = run["implementations"][0]
    expected["columns_run_apart"] = {"reference": {**META, "seconds": 10.0, "command": COMMAND}}
    assert out == report.dumps(expected)
    assert json.loads(text) == previous  # merge changed nothing it was given


def test_the_merged_page_names_the_run_and_renders_the_others_as_before() -> None:
    previous = merge.load(OLDER)
    assert previous is not None
    before = markdown.render(previous)
    page = markdown.render(merge.merge(previous, _run("reference"), COMMAND))
    assert (
        "The reference column is from a run of its own, merged into this table: "
        f"`{COMMAND}` on later, PostgreSQL 15.19, profile `ci`, 10 s; "
        "the other columns are from the run above." in page
    )
    assert markdown.NO_COUNTS in before and markdown.NO_COUNTS not in page
    for line in before.splitlines():
        if line.startswith("1. "):
            assert line in page  # the other columns' notes, as they were
        if line.startswith("| graphile-worker-0.18.0 |"):
            # its row as it was, with no client: the older file recorded none
            name, queue, rest = line.split(" | ", 2)
            assert f"{name} | {queue} | - | {rest}" in page
    table = page[page.index("| exercised | reference |\n") :]
    assert table.splitlines()[2] == "| single-completion | 3 |"
    others = "reference.sql, graphile-worker-0.18.0, graphile-worker-0.13.0, pgboss-12.38.0"
    assert f"Counts {markdown.NOT_RECORDED} for: {others}." in page


def test_a_new_column_takes_its_place_in_the_table_order() -> None:
    """procrastinate-3.10 comes after reference.sql and before the npm columns."""
    previous = merge.load(OLDER)
    assert previous is not None
    run = _run("procrastinate-3.10", "leasecheck.adapters.procrastinate_queue:ProcrastinateQueue")
    names = [i["name"] for i in merge.merge(previous, run, "c")["implementations"]]
    assert names == [
        "reference",
        "reference.sql",
        "procrastinate-3.10",
        "graphile-worker-0.18.0",
        "graphile-worker-0.13.0",
        "pgboss-12.38.0",
    ]


def test_a_column_run_again_replaces_its_earlier_run_apart() -> None:
    """Its header (and a hand-written note on it) goes with the run it described; the
    page lists the runs apart in the order they were merged."""
    previous = merge.load(OLDER)
    assert previous is not None
    once = merge.merge(previous, _run("reference"), "first")
    once["columns_run_apart"]["reference"]["note"] = "(hand-written)"
    twice = merge.merge(once, _run("reference.sql"), "second")
    assert "(hand-written)" in markdown.render(twice)
    again = merge.merge(twice, _run("reference"), "third")
    assert list(again["columns_run_apart"]) == ["reference.sql", "reference"]
    assert again["columns_run_apart"]["reference"]["command"] == "third"
    page = markdown.render(again)
    assert "(hand-written)" not in page
    assert page.index("`second`") < page.index("`third`")
    assert "the other columns are from the run above or the runs named here." in page


def test_a_property_the_older_columns_never_knew_reads_as_not_judged() -> None:
    """Merged into results from before late-owner existed, the new column judges it and
    the older columns show "-" for it, in the property's own row."""
    previous = merge.load(OLDER)
    assert previous is not None
    del previous["properties"]["late-owner"]
    for impl in previous["implementations"]:
        del impl["properties"]["late-owner"]
    merged = merge.merge(previous, _run("reference"), COMMAND)
    assert list(merged["properties"]) == list(ALL)
    page = markdown.render(merged)
    row = next(ln for ln in page.splitlines() if ln.startswith("| late-owner |"))
    assert row == "| late-owner | holds | - | - | - | - |"


def test_what_cannot_take_a_merge_is_refused(tmp_path: Path) -> None:
    """No file: nothing to merge. Another major's file, or one the merge would reformat
    throughout, is refused before any run."""
    assert merge.load(tmp_path / "conformance.json") is None
    with pytest.raises(merge.ResultsError, match=r"PostgreSQL 18\.6"):
        merge.load(OLDER, "18.6")
    reformatted = tmp_path / "conformance.json"
    reformatted.write_text(json.dumps(json.loads(OLDER.read_text()), indent=2) + "\n")
    with pytest.raises(merge.ResultsError, match="not in the format"):
        merge.load(reformatted)
    reformatted.write_text("{}")
    with pytest.raises(merge.ResultsError, match="cannot merge"):
        merge.load(reformatted)


SHOWS = """
import sys
print("job1 completed twice through the library's own calls")
print("WITNESSED: job1 was completed twice")
"""
GONE = """
import sys
print("NOT REPRODUCED: job1 was completed once")
sys.exit(1)
"""


def test_only_merges_into_the_results_there(
    leasecheck_server_dsn: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """End to end: the reference column replaces its own, with the counts its run printed;
    the other column, its files and its bytes stay. A witnessed cell the run did not reach
    stays violated while its witness, run again, shows it (its counterexample kept), and
    turns to holds once the witness no longer does (its files gone)."""
    out, cache, scripts = tmp_path / "results", tmp_path / "cache", tmp_path / "witnesses"
    stale = report.Column(
        Target("reference", "leasecheck.reference.queue:ReferenceQueue"),
        None,
        Verdicts(error="from an earlier run"),
        5.0,
    )
    other = report.Column(
        Target("reference.sql", "leasecheck.adapters.sqlfile_queue:from_env"),
        None,
        Verdicts(holds=list(ALL), runs=1),
        6.0,
    )
    meta = {"date": "before", "postgres": "18.6", "profile": "ci", "python": "3", "seconds": 11}
    out.mkdir()
    earlier = report.as_data([stale, other], meta, [{}, {}], out)
    for prop, body in (("fencing", SHOWS), ("single-completion", GONE)):
        files = [f"counterexamples/reference/{prop}.txt"]
        note = "WITNESSED: an earlier run's"
        earlier["implementations"][0]["properties"][prop] = {
            "verdict": witness.WITNESSED,
            "files": files,
            "witness": {"script": None, "output": None, "note": note},
        }
        script = witness.script_for("reference", prop, scripts)
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(textwrap.dedent(body))
    monkeypatch.setattr(witness, "SCRIPTS", scripts)
    columns = [replace(t, env=SEARCH_ONLY) if t.name == "reference" else t for t in targets.TARGETS]
    monkeypatch.setattr(targets, "TARGETS", tuple(columns))
    (out / "conformance.json").write_text(report.dumps(earlier))
    before = (out / "conformance.json").read_text()
    earlier_files = [
        ("reference", "fencing"),
        ("reference", "single-completion"),
        ("reference.sql", "fencing"),
    ]
    for name, prop in earlier_files:
        (out / "counterexamples" / name).mkdir(parents=True, exist_ok=True)
        (out / "counterexamples" / name / f"{prop}.txt").write_text(f"earlier {prop} of {name}\n")
    argv = ["--only", "reference", "--profile", "dev", "--pg-dsn", leasecheck_server_dsn]
    argv += ["--out", str(out), "--cache", str(cache)]
    assert cli.main(argv) == 0
    said_out = capsys.readouterr().out
    assert "merged reference into" in said_out
    assert "holds, and the witness no longer shows it: single-completion" in said_out
    assert "fencing (witnessed; this run did not reach it)" in said_out
    text = (out / "conformance.json").read_text()
    data = json.loads(text)
    assert [i["name"] for i in data["implementations"]] == ["reference", "reference.sql"]
    previous = json.loads(before)
    assert _block(previous["implementations"][1]) in text
    assert {k: data[k] for k in ("date", "seconds")} == {"date": "before", "seconds": 11}
    ours = data["implementations"][0]
    assert ours["error"] is None and ours["runs"] == 1
    (output,) = cache.glob("matrix-runs/*/reference/run1/output.txt")
    assert ours["exercised"] == _summary(output.read_text())
    apart = data["columns_run_apart"]["reference"]
    said = " ".join(["python", "-m", "matrix", *argv]).replace(leasecheck_server_dsn, "DSN")
    assert apart["command"] == said and leasecheck_server_dsn not in text
    assert apart["profile"] == "dev"
    assert (out / "conformance.md").read_text() == markdown.render(data)
    kept = ours["properties"]["fencing"]
    assert kept["verdict"] == witness.WITNESSED
    assert kept["files"] == ["counterexamples/reference/fencing.txt"]
    assert kept["witness"]["note"] == unreached.NOTE + "WITNESSED: job1 was completed twice"
    assert kept["witness"]["output"] == "witnesses/reference/fencing.txt"
    assert "completed twice" in (out / kept["witness"]["output"]).read_text()
    assert (out / kept["files"][0]).read_text() == "earlier fencing of reference\n"
    assert ours["properties"]["single-completion"] == {"verdict": "holds"}
    assert sorted(p.name for p in (out / "counterexamples" / "reference").iterdir()) == [
        "fencing.txt"
    ]
    assert (out / "counterexamples" / "reference.sql" / "fencing.txt").exists()


def test_a_control_is_run_but_never_published(
    leasecheck_server_dsn: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A known-buggy control named with --only is run and summed up, and no table, file
    or column of it reaches the published results; a column run beside it is merged."""
    out, cache = tmp_path / "results", tmp_path / "cache"

    def judged(target: Target, *_: object) -> report.Column:
        verdicts = Verdicts(holds=list(ALL), runs=1)
        return report.Column(target, None, verdicts, 1.0)

    monkeypatch.setattr(cli, "_one", judged)
    base = ["--pg-dsn", leasecheck_server_dsn, "--out", str(out), "--cache", str(cache)]
    assert cli.main(["--only", "naive.sql", *base]) == 0
    assert "controls naive.sql are not published" in capsys.readouterr().out
    assert not out.exists()
    out.mkdir()
    with psycopg.connect(leasecheck_server_dsn) as conn:
        postgres = str(conn.execute("show server_version").fetchone()[0])  # type: ignore[index]
    (out / "conformance.json").write_text(report.dumps({**_run("reference"), "postgres": postgres}))
    assert cli.main(["--only", "reference", "attempt_key.sql", *base]) == 0
    said = capsys.readouterr().out
    assert "merged reference into" in said
    assert "controls attempt_key.sql are not published" in said
    data = json.loads((out / "conformance.json").read_text())
    assert [i["name"] for i in data["implementations"]] == ["reference"]
    assert list(data["columns_run_apart"]) == ["reference"]
    assert "| attempt_key.sql |" not in (out / "conformance.md").read_text()  # the command names it
    assert not (out / "counterexamples" / "attempt_key.sql").exists()
