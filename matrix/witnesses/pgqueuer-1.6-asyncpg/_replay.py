"""Run a pgqueuer-1.6 witness with pgqueuer's `AsyncpgDriver` instead of its `PsycopgDriver`.

The pgqueuer-1.6-asyncpg column is pgqueuer 1.6 on asyncpg, as most of its users run
it; its violations are the pgqueuer-1.6 column's, so its witnesses replay the same story
(matrix/witnesses/pgqueuer-1.6/, `_stale_manager.py`) with the same judges. `replay`
selects the asyncpg driver there (`_stale_manager.use_asyncpg()`: every manager, and the
install and the enqueue, goes through `pgqueuer.AsyncpgDriver` on an asyncpg connection
of its own; the story's own reads and its heartbeat rewrite stay on psycopg), then runs
the pgqueuer-1.6 script of the same name as `__main__`, which prints the steps and the
verdict and exits.
"""

import runpy
import sys
from pathlib import Path

STORY = Path(__file__).resolve().parents[1] / "pgqueuer-1.6"


def replay(script: str) -> None:
    """Run pgqueuer-1.6's witness named as `script` on the asyncpg driver (it exits)."""
    sys.path.insert(0, str(STORY))
    import _stale_manager  # from STORY, put on the path just above

    _stale_manager.use_asyncpg()
    runpy.run_path(str(STORY / Path(script).name), run_name="__main__")
