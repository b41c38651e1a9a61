"""exclusive-lease, oban 0.6.3: a job is fetched again while the producer that fetched it
last is still running it, well inside its lease.

Replays matrix/results/counterexamples/oban-0.6.3/exclusive-lease.txt: producer w0 fetches
job1 and runs past the lease; the Lifeline rescues it and w1 fetches it; w0's run raises
and its ack `retryable` (due at once) is taken; the Stager makes the job available and
w0 fetches it again while w1 is still running it. Steps and time: see `../_oban.py`
(oban's own fetch, executor, ack, rescue, stager; the job's `attempted_at` is moved
31 s into the past).

Why a bug, not a design: w1's execution is 0 s old, nowhere near the Lifeline's
rescue_after, yet the job runs twice at once: the rescued execution's failure ack is
applied to the job by id (in any state, oban/queries/ack_job.sql:10).
0.7.0 fences the ack on the execution's `attempted_at` (ack_job.sql:12); the same
script in 0.7.0's venv prints NOT REPRODUCED.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _oban import exclusive_lease, run

if __name__ == "__main__":
    sys.exit(run(exclusive_lease))
