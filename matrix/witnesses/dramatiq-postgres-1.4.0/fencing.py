"""fencing, dramatiq-postgres 1.4.0: the ack of a worker whose message was requeued is accepted.

Replays matrix/results/counterexamples/dramatiq-postgres-1.4.0/fencing.txt: worker w0
claims job1 and stalls; at t=30s maintenance requeues job1 and w1 claims it; w0 resumes
and its completion of job1 is accepted, and w1's completion is then refused (deletes
nothing). Here with dramatiq's own worker processes (`_dramatiq.py`): worker A's
execution 1 is frozen (SIGSTOP), B's maintenance requeues the message after
`heartbeat_ttl` and B claims it (execution 2); A is thawed and execution 1 returns. A's
ack deletes the message's row, `consumed` by B, while B's execution 2 is still running:
the message has no row, so dramatiq-postgres shows it acknowledged (done) while it
runs, and a failure of execution 2 could no longer be recorded as such. Then execution
2 returns and B's ack deletes nothing.

Why a bug and not a design: maintenance requeues a message because its worker is taken
for dead ("Kill -9 a worker and its messages are back in the queue within heartbeat_ttl
seconds", the README's "Crash recovery"), and `CLAIM` (`dramatiq_postgres/broker.py`
lines 435-454) then records the new owner, `worker_id = <B>`, as the README says
("worker owning the message while consumed"; its admin refuses to requeue or delete a
consumed message because "a worker owns that message right now"). But the ack ignores
that owner, `broker.py` lines 418-425:

    WITH acked AS (
        DELETE FROM {schema}.{tablename}
        WHERE message_id = %s
            AND queue_name = %s
            AND "state" = 'consumed'

`PostgresConsumer.ack` (lines 333-355) passes only the message's id and queue. So the
worker maintenance took the message from, once it runs again, acks the delivery
another live worker holds: `"state" = 'consumed'` is true of whoever consumed it. The
ack's own comment (lines 342-344) shows the state test was meant to skip a message the
Retries middleware put back, not another worker's delivery.
"""

from _dramatiq import Story, finish, run, say


def steps(s: Story) -> int:
    mark = s.last_write()
    s.release(1, "return")
    gone = s.written("A's ack", mark, lambda w: w.op == "DELETE")
    if gone is None or not s.acked("A"):
        return finish(False, "worker A's ack of execution 1 deleted nothing")
    say(f"worker A: execution 1 returned; consumer.ack -> {s.write(gone)}")
    if gone.by != "A" or gone.worker_id is None or s.who(gone.worker_id) != "B":
        return finish(False, f"the row A's ack deleted was not B's ({s.write(gone)})")
    row = s.row()
    b_acks = s.acks("B")
    say(f"  while B's execution 2 runs (not released, B has acked {b_acks} times): {s.shown()}")
    if row is not None or b_acks:
        return finish(False, "the message still had a row, or B had acked, after A's ack")
    mark = s.last_write()
    s.release(2, "return")
    if not s.acked("B"):
        return finish(False, "worker B never acked execution 2")
    later = s.written_by_ack("B", mark)
    say(
        f"worker B: execution 2 returned; consumer.ack -> rows written since: "
        f"{[s.write(w) for w in later] or 'none'}; {s.shown()}"
    )
    if later:
        return finish(False, "B's ack wrote something: the message was not acked by A alone")
    runs = [(e.worker, e.retries) for e in s.executions()]
    say(f"executions of the task (its receipts): {runs}")
    return finish(
        True,
        "dramatiq-postgres accepted the ack of a worker whose message maintenance had "
        "requeued: worker A, frozen past heartbeat_ttl, woke and its ack of execution 1 "
        "deleted the message's row, consumed by worker B, while B's execution 2 was still "
        "running (the message showed as done); B's own ack then deleted nothing",
    )


raise SystemExit(run(steps))
