"""failure-cap-counts-claims — declares a cap on failure reports, and counts deliveries.

Source: a library whose docs say "max retries" of a failing task while its code
compares the delivery counter (django-q2's `attempt_count` and dramatiq's `retries`
count different things; an adapter that reads one for the other). The queue declares
`max_failures = 3`, but its failure report gives the job up once the job was claimed
three times, so a job whose lease expired twice is given up at its first failure.
Caught by: no-lost-jobs (failed for good after 1 accepted failure report of the 3 it
was promised); late-owner when its owner is refused after the early give-up.
"""

from __future__ import annotations

from mutants._failure_capped import FailureCapped


class FailureCapCountsClaims(FailureCapped):
    name = "failure-cap-counts-claims"
    expected = ("no-lost-jobs", "late-owner")
    fail_query = "fail_counting_claims"
