"""No silent hang: a queue call that never answers stops the run with one line and no
verdict, and progress lines reach the terminal under `-n 0` too.

A library that retries or reconnects forever (DBOS retried a cut connection, a tenacity
ack retries a connection error) keeps its call going after the harness cancels its
statement. Each test runs a real property run in a child pytest on such a queue and
reads what it printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests import child

pytestmark = pytest.mark.slow

RETRIES_FOREVER = '''
import psycopg

from leasecheck.reference.queue import ReferenceQueue


class RetriesForever(ReferenceQueue):
    """Its completion retries every database error, for ever: a reconnect loop."""

    name = "retries-forever"

    def complete(self, conn, claim, effect):
        while True:
            try:
                conn.execute("select pg_sleep(3600)")
            except psycopg.Error:
                continue
'''


def _run(tmp_path: Path, dsn: str, *extra: str) -> child.Finished:
    (tmp_path / "forever.py").write_text(RETRIES_FOREVER)
    argv = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        "--pyargs", "leasecheck.suite", "--leasecheck-queue=forever:RetriesForever",
        "--leasecheck-profile=dev", f"--leasecheck-pg-dsn={dsn}", "-k", "properties", *extra,
    ]  # fmt: skip
    return child.run(argv, tmp_path / "tmp", cwd=tmp_path, timeout=300)


def test_a_call_that_never_answers_stops_the_run_with_one_line(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    """Its statement cancelled at the deadline, the completion retries; it is ended in
    its thread, and the run says which call, and what to check, judging nothing. While
    it waits, the progress line reaches the terminal under -n 0, not pytest's capture
    (the deadline outlasts the first line, 10 s in; the child mostly sleeps)."""
    done = _run(tmp_path, leasecheck_server_dsn, "-n", "0", "--leasecheck-call-deadline=11")
    assert done.returncode == 1, done.output
    progress = [i for i, line in enumerate(done.lines) if line.startswith("leasecheck: 10 s: ")]
    failures = [i for i, line in enumerate(done.lines) if " FAILURES " in line]
    assert progress and failures and progress[0] < failures[0], done.output
    assert "Captured stdout" not in done.output, done.output
    said = [line for line in done.lines if "did not return within 11 s" in line]
    assert said, done.output
    assert "the queue broke the contract" in said[0] and "no property was judged" in said[0]
    assert "retry or reconnect forever" in said[0] and "'s complete of job1" in said[0], said[0]
    assert "not run: the queue broke the contract in shard-" in done.output
    assert "Traceback" not in done.output, done.output


def test_a_deadline_that_is_not_seconds_is_a_usage_error(
    tmp_path: Path, leasecheck_server_dsn: str
) -> None:
    done = _run(tmp_path, leasecheck_server_dsn, "--leasecheck-call-deadline=soon")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.output
    assert "'soon' is not a number of seconds: give one, e.g. 30" in done.output
