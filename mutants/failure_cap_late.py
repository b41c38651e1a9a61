"""failure-cap-late — a cap on failure reports that gives the job up one report late.

Source: the off-by-one of retry counters ("retries" against "attempts": procrastinate's
`RetryStrategy(max_attempts=N)` runs a failing job N + 1 times, and an adapter that
declares N there promises one run too few). The queue declares `max_failures = 3` and
gives the job up at its fourth accepted failure report, so after the third the job is
queued again and claimed once more. Caught by: retry-cap (a claim after the third
accepted failure report).
"""

from __future__ import annotations

from mutants._failure_capped import FailureCapped


class FailureCapLate(FailureCapped):
    name = "failure-cap-late"
    expected = ("retry-cap",)
    fail_query = "fail_counted_late"
