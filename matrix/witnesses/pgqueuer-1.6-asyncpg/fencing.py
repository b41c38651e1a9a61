"""fencing, pgqueuer 1.6 on asyncpg: a stale worker's retry re-queues another worker's job.

matrix/witnesses/pgqueuer-1.6/fencing.py, run on pgqueuer's `AsyncpgDriver` (see
`_replay.py`): manager B re-picks the job whose heartbeat manager A stopped sending, and
A's late failure (`Queries.retry_job`, `WHERE id = $1` alone) still re-queues it while
B runs it. The story, its judge and why it is a bug are that script's.
"""

from _replay import replay

if __name__ == "__main__":
    replay(__file__)
