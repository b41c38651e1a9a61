"""owner-progress, dramatiq-postgres 1.4.0: the worker that holds a message cannot complete it.

Replays matrix/results/counterexamples/dramatiq-postgres-1.4.0/owner-progress.txt:
worker w0 claims job1 and stalls; at t=30s maintenance requeues job1 and w1 claims it;
w0 resumes and its failure report of job1 is accepted; then w1, which owns job1 (nobody
else has been granted it), completes it and the completion is refused. Here with
dramatiq's own worker processes (`_dramatiq.py`): worker A's execution 1 is frozen
(SIGSTOP), B's maintenance requeues the message after `heartbeat_ttl` and B claims it
(execution 2); A is thawed and execution 1 raises: dramatiq's Retries middleware
re-enqueues the message, for its backoff (`min_backoff=3000`, so 3-6 s), on the delay
queue. Before anyone claims it again, B's execution 2 returns and B acks it: the ack
deletes nothing, because the row B consumed is no longer `consumed` (nor on B's queue).
The message B ran to success is then delivered again, execution 3.

Why a bug and not a design: B is the message's owner, by dramatiq-postgres's own record
(`CLAIM`, `dramatiq_postgres/broker.py` lines 435-454, wrote `worker_id = <B>`; B kept
heartbeating, so maintenance never took it back), and no other worker has been given
it. Its ack, `broker.py` lines 418-425 (`DELETE ... WHERE message_id = %s AND
queue_name = %s AND "state" = 'consumed'`), finds the row re-queued under it by A's late
retry, which took the message from B with an upsert by message id alone (`ENQUEUE`,
lines 455-474: `ON CONFLICT (message_id) DO UPDATE SET "state" = 'queued', ...,
worker_id = NULL`), and so deletes nothing. B is not told (`PostgresConsumer.ack`,
lines 333-355, returns nothing either way), and the work B finished runs again: the
owner's successful completion is lost to a failure report from a worker maintenance had
already given up on.
"""

from _dramatiq import Story, finish, run, say, stale_failure

BACKOFF = 3000


def steps(s: Story) -> int:
    retry = stale_failure(s)
    s.release(2, "return")
    if not s.acked("B"):
        return finish(False, "worker B never acked execution 2")
    later = s.written_by_ack("B", retry.n)
    runs, row = s.executions(), s.row()
    say(
        "worker B: execution 2 returned; consumer.ack -> "
        f"{[s.write(w) for w in later] or 'nothing written'}; {s.shown(row, read=False)}"
    )
    if later or len(runs) > 2 or row is None or row["state"] != "queued":
        return finish(False, "the message was written or run again before B's ack")
    say("  (no claim since A's retry: B is the only worker ever given the message since REAP)")
    third = s.running(3)
    if third is None:
        return finish(False, "the message was not delivered again after B's completion")
    runs = s.executions()
    say(f"executions of the task (its receipts): {[(e.worker, e.retries) for e in runs]}")
    return finish(
        True,
        "dramatiq-postgres refused the completion of the worker that held the message: "
        "worker B claimed it after maintenance requeued it from frozen worker A, and "
        "while B ran it, A woke and its failure's retry re-queued the message under B; "
        "B's execution 2 then returned and its ack deleted nothing (nobody else had "
        "claimed the message), and the message B had completed ran again, execution 3 "
        f"({third.worker})",
    )


raise SystemExit(run(steps, min_backoff=BACKOFF))
