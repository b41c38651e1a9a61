"""no-lost-jobs, dramatiq-postgres 1.4.0: a message whose ack was accepted runs again.

Replays matrix/results/counterexamples/dramatiq-postgres-1.4.0/no-lost-jobs.txt: worker
w0 claims job3 and stalls; maintenance requeues job3 and w1.2 claims it; w0 resumes and
its completion of job3 is accepted; then w1.2's failure of job3 is accepted too, and job3
is handed out again after the queue had accepted its completion. Here with dramatiq's
own worker processes (`_dramatiq.py`): worker A's execution 1 is frozen (SIGSTOP), B's
maintenance requeues the message after `heartbeat_ttl` and B claims it (execution 2); A
is thawed and execution 1 returns. A's ack deletes the message's row, `consumed` by B:
dramatiq-postgres has accepted the message's completion ("Acknowledging a message
DELETEs its row", the README; the ack also notifies `dramatiq.default.ack` with the
message). Then B's execution 2 raises: dramatiq's Retries middleware counts the failure
(`dramatiq/middleware/retries.py` line 110, `message.options["retries"] += 1`) and calls
`broker.enqueue(message, delay=delay)` (line 148), which, finding no row, inserts the
message anew (on the delay queue, `default.DQ`, for the backoff); dramatiq moves it back
to "default" when it is due, and a worker claims and runs it: execution 3, of a message
whose ack had been accepted.

Why a bug and not a design: it is the missing fence of `fencing.py`. Maintenance gave
the message to B, and `CLAIM` (`dramatiq_postgres/broker.py` lines 435-454) recorded B
as its owner (`worker_id = <B>`), but the ack, `broker.py` lines 418-425, ignores the
owner: `DELETE FROM {schema}.{tablename} WHERE message_id = %s AND queue_name = %s AND
"state" = 'consumed'` (`PostgresConsumer.ack`, lines 333-355, passes only the message's
id and queue), so A's ack of a delivery maintenance took from it completes B's. Its
consequence here: the completion does not hold. The message is gone, yet B still runs
it, and B's failure goes through `ENQUEUE` (lines 455-474), an upsert by message id
whatever the row's state:

    INSERT INTO {schema}.{tablename}
    (queue_name, message_id, "state", message, available_at)
    VALUES (%s, %s, 'queued', %s,
            NOW() + make_interval(secs => %s / 1000.0))
    ON CONFLICT (message_id)
        DO UPDATE SET
            "state" = 'queued',

With the row deleted there is no conflict: a plain `INSERT` puts the acked message back
in the queue, and it runs a third time. Whoever saw the message done (the ack's
notification, the `queue` table of "pending and in-flight messages" no longer holding it)
saw it wrongly. Had the ack been refused for the delivery A no longer held (the fence),
B's failure would have been an ordinary retry of a message nobody had completed.
"""

from _dramatiq import Story, finish, reinserted, run, say


def steps(s: Story) -> int:
    third = reinserted(s)
    receipts = [(e.worker, e.retries) for e in s.executions()]
    say(f"executions of the task (its receipts): {receipts}")
    return finish(
        len(receipts) == 3,
        "dramatiq-postgres ran a message again after accepting its ack: worker A, frozen "
        "past heartbeat_ttl, woke and its ack of execution 1 deleted the message's row, "
        "consumed by worker B; B's execution 2 then raised and its retry (Retries -> "
        "broker.enqueue, an upsert with no row left) inserted the acked message back, and "
        f"worker {third.worker} claimed and ran it: execution 3, retries={third.retries}",
    )


raise SystemExit(run(steps))
