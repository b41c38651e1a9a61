"""fencing, graphile-worker 0.18.0 on its own client: a completion whose lock expired is accepted.

The graphile-worker-0.18.0-node column runs graphile-worker's own worker-pool calls on its
own pg pool; its fencing counterexample is the graphile-worker-0.18.0 column's (a worker
holds a job past the lock, `resetLockedAt` frees it, another worker fetches it, and the
first worker's `batchCompleteJobs` deletes the row the second now holds: `where id = $1`
alone). So its witness is that column's, matrix/witnesses/graphile-worker-0.18.0/fencing.py,
run as it is: the story, its judge and why it may be a bug are that script's.
"""

import runpy
import sys
from pathlib import Path

STORY = Path(__file__).resolve().parents[1] / "graphile-worker-0.18.0"

if __name__ == "__main__":
    sys.path.insert(0, str(STORY))
    runpy.run_path(str(STORY / "fencing.py"), run_name="__main__")
