"""The double-receipt demo, run for real: worker processes, signals, the suite's server."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from leasecheck.dbfixtures import janitor

ROOT = Path(__file__).resolve().parent.parent
# The story, written out here rather than imported, so the demo cannot grade itself.
STORY = {
    ("slow-job", "naive"): 2,
    ("slow-job", "heartbeat"): 1,
    ("slow-job", "fenced"): 1,
    ("paused-worker", "naive"): 2,
    ("paused-worker", "heartbeat"): 2,
    ("paused-worker", "fenced"): 1,
}

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class DemoRun:
    """What one `python -m leasecheck.reference.demo --fast` run printed, returned and wrote."""

    returncode: int
    output: str
    table: dict[str, Any]


@pytest.fixture(scope="module")
def demo_run(leasecheck_server_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """Run the fast demo once against the suite's server and keep what it produced."""
    path = tmp_path_factory.mktemp("demo") / "demo.json"
    command = [
        sys.executable,
        "-m",
        "leasecheck.reference.demo",
        "--fast",
        "--pg-dsn",
        leasecheck_server_dsn,
    ]
    result = subprocess.run(
        [*command, "--json", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    table = json.loads(path.read_text()) if path.exists() else {}
    return DemoRun(result.returncode, output, table)


def test_demo_counts_the_receipts_the_story_predicts(demo_run: DemoRun) -> None:
    """Naive workers send two receipts, heartbeats fix only the slow job, fencing fixes both."""
    assert demo_run.returncode == 0, demo_run.output
    cells = {(c["scenario"], c["mode"]): c["receipts"] for c in demo_run.table["cells"]}
    assert cells == STORY, demo_run.output
    assert demo_run.table["ok"] is True


def test_demo_leaves_no_database_behind(demo_run: DemoRun, leasecheck_server_dsn: str) -> None:
    """Every database the demo created on the suite's server is dropped when it ends."""
    assert demo_run.table, demo_run.output
    assert [name for name in janitor.leftovers(leasecheck_server_dsn) if "demo" in name] == []
