"""fencing, oban 0.6.7: a rescued execution's late failure is acked while another producer
runs the job.

Replays matrix/results/counterexamples/oban-0.6.7/fencing.txt: producer w0 fetches job1
and runs past the lease; the Lifeline rescues it and w1 fetches it; w0's run raises and
its ack `retryable` is taken while w1 is still running the job (the same holds for a
late `completed` ack). Steps and time: see `../_oban.py` (oban's own fetch, executor,
ack, rescue; the job's `attempted_at` is moved 31 s into the past).

Why a bug, not a design: 0.6.7's `ack_job.sql` updates `WHERE id = %(id)s AND state =
'executing'` (oban/queries/ack_job.sql:10-11): once the rescued job is fetched again it
is `executing`, so the rescued execution's ack lands on the new execution. 0.7.0 adds
`AND attempted_at = %(attempted_at)s` (ack_job.sql:12), exactly so that a rescued
execution's ack cannot touch the job's next execution; the same script in 0.7.0's venv
prints NOT REPRODUCED.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _oban import fencing, run

if __name__ == "__main__":
    sys.exit(run(fencing))
