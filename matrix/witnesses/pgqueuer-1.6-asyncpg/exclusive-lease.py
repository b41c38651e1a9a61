"""exclusive-lease, pgqueuer 1.6 on asyncpg: a third worker gets a job while B's lease is fresh.

matrix/witnesses/pgqueuer-1.6/exclusive-lease.py, run on pgqueuer's `AsyncpgDriver` (see
`_replay.py`): after manager B re-picked a stale job, manager A's late failure re-queues
it by id, and manager C picks it while B still runs it with a heartbeat seconds old. The
story, its judge and why it is a bug are that script's.
"""

from _replay import replay

if __name__ == "__main__":
    replay(__file__)
