"""single-completion, dramatiq-postgres 1.4.0: two acks of one message are both accepted.

Replays matrix/results/counterexamples/dramatiq-postgres-1.4.0/single-completion.txt:
worker w0 claims job1 and stalls; maintenance requeues job1 and w1 claims it; w0 resumes
and its completion of job1 is accepted; w1's failure of job1 is then accepted too, job1
is claimed again (by the drain) and that completion is accepted: the queue accepted 2
completions of job1. (The counterexample's job2 and job3, stalled and requeued the same
way meanwhile, do not touch job1 and are left out.) Here with dramatiq's own worker
processes (`_dramatiq.py`): worker A's execution 1 is frozen (SIGSTOP), B's maintenance
requeues the message after `heartbeat_ttl` and B claims it (execution 2); A is thawed
and execution 1 returns: A's ack deletes the message's row, `consumed` by B (the first
accepted completion). B's execution 2 then raises: dramatiq's Retries middleware
(`dramatiq/middleware/retries.py` line 148) calls `broker.enqueue`, which, finding no
row, inserts the message anew (on `default.DQ` for the backoff, then back to "default"),
and a worker claims it: execution 3, as in `no-lost-jobs.py`. One step further here:
execution 3 returns and its worker's ack deletes the row again (the second accepted
completion). Each accepted ack also notified `dramatiq.default.ack` with the message,
the channel that "Actually means done" (`dramatiq_postgres/broker.py` line 362).

Why a bug and not a design: it is the missing fence of `fencing.py`. Maintenance gave
the message to B, and `CLAIM` (`broker.py` lines 435-454) recorded B as its owner
(`worker_id = <B>`), but the ack, `broker.py` lines 418-425, ignores the owner:

    WITH acked AS (
        DELETE FROM {schema}.{tablename}
        WHERE message_id = %s
            AND queue_name = %s
            AND "state" = 'consumed'

(`PostgresConsumer.ack`, lines 333-355, passes only the message's id and queue), so A's
stale ack completes the delivery B holds. The completion is not final: B still runs the
message, and its failure goes through `ENQUEUE` (lines 455-474), an upsert by message id,
`INSERT ... ON CONFLICT (message_id) DO UPDATE SET "state" = 'queued', ...`, which with
the row deleted is a plain `INSERT` of the acked message. Its next delivery completes
normally and is accepted as well: one message, two accepted completions, each a `DELETE`
of its row ("Acknowledging a message DELETEs its row", the README) and a "done"
notification, and the task's effect twice over (executions 1 and 3 both returned: the
customer's two receipts). Had A's ack been refused for the delivery it no longer held,
B's failure would have been an ordinary retry and the message completed once.
"""

from _dramatiq import Story, finish, reinserted, run, say


def steps(s: Story) -> int:
    third = reinserted(s)
    if not s.acked("B"):  # B's ack of execution 2, after its retry was enqueued
        return finish(False, "worker B never acked execution 2 after its retry")
    name = third.worker
    acks = s.acks(name)
    before = s.last_write()
    s.release(3, "return")
    if not s.acked(name, count=acks + 1):
        return finish(False, f"worker {name} never acked execution 3")
    deleted = [w for w in s.written_by_ack(name, before) if w.op == "DELETE"]
    if len(deleted) != 1 or deleted[0].by != name or s.who(deleted[0].worker_id) != name:
        return finish(False, f"worker {name}'s ack of execution 3 did not delete its row")
    say(f"worker {name}: execution 3 returned; consumer.ack -> {s.write(deleted[0])}; {s.shown()}")
    accepted = [w for w in s.writes() if w.statement == "ACK" and w.op == "DELETE"]
    for w in accepted:
        say(f"  accepted ack (a DELETE of the message's row): {s.write(w)}")
    receipts = [(e.worker, e.retries) for e in s.executions()]
    say(f"executions of the task (its receipts): {receipts}, 1 and 3 returned")
    if len(accepted) != 2 or s.row() is not None:
        return finish(False, f"{len(accepted)} acks deleted the message's row, not 2")
    return finish(
        True,
        "dramatiq-postgres accepted two completions of one message: worker A, frozen past "
        "heartbeat_ttl, woke and its ack of execution 1 deleted the message's row, consumed "
        "by worker B; B's execution 2 then raised and its retry (Retries -> broker.enqueue, "
        f"an upsert with no row left) inserted the acked message back; worker {name} ran it "
        f"(execution 3, retries={third.retries}) and its ack deleted the row again",
    )


raise SystemExit(run(steps))
