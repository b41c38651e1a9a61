"""exclusive-lease, dramatiq-postgres 1.4.0: a stale failure hands a running message out again.

Replays matrix/results/counterexamples/dramatiq-postgres-1.4.0/exclusive-lease.txt:
worker w2 claims job1 and stalls; at t=30s maintenance requeues job1 and w0 claims it;
w2 resumes, its failure report of job1 is accepted, and w2 claims job1 again while w0
still holds it. Here with dramatiq's own worker processes (`_dramatiq.py`): worker A's
execution 1 is frozen (SIGSTOP), B's maintenance requeues the message after
`heartbeat_ttl` and B claims it (execution 2); A is thawed and execution 1 raises.
dramatiq's Retries middleware re-enqueues the message, which puts B's `consumed` row
back to `queued` (on the delay queue, for the retry's backoff), and once due it is
claimed again: execution 3 starts in A while B's execution 2 is still running. Two
executions of one message run at once, both `consumed` as far as each worker knows.

Why a bug and not a design: the retry is `broker.enqueue` (dramatiq's
`middleware/retries.py` line 148, `broker.enqueue(message, delay=delay)`), which
dramatiq-postgres runs as an upsert by message id (`dramatiq_postgres/broker.py` lines
455-474, `ENQUEUE`, its `WITH ... pg_notify` wrapper left out and the lines joined):

    INSERT INTO {schema}.{tablename} (queue_name, message_id, "state", message, available_at)
    VALUES (%s, %s, 'queued', %s, NOW() + make_interval(secs => %s / 1000.0))
    ON CONFLICT (message_id)
        DO UPDATE SET
            "state" = 'queued', message = EXCLUDED.message, queue_name = EXCLUDED.queue_name,
            available_at = EXCLUDED.available_at, worker_id = NULL, consumed_at = NULL,
            mtime = NOW()

It overwrites whatever state the row is in, here another live worker's `consumed`
delivery (`worker_id = <B>`, written by `CLAIM`, lines 435-454), with no test of who is
retrying. Maintenance took the message from A because A looked dead (`REAP`, lines
524-535); nothing stops A's late failure from taking it back from B. The README's own
admin refuses to requeue a consumed message because "a worker owns that message right
now, and requeuing ... it would run the task twice"; the retry path does exactly that.
"""

from _dramatiq import Story, finish, run, say, stale_failure


def steps(s: Story) -> int:
    retry = stale_failure(s)
    third = s.running(3)
    if third is None:
        return finish(False, "nobody claimed the message again after A's retry")
    b_acks = s.acks("B")
    say(f"  executions 2 (B) and 3 ({third.worker}) both running; B has acked {b_acks} times")
    if b_acks:
        return finish(False, "B's execution 2 had ended before execution 3 started")
    mark = s.last_write()
    s.release(2, "return")
    if s.acked("B"):
        later = [s.write(w) for w in s.written_by_ack("B", mark)]
        say(f"worker B: execution 2 returned; consumer.ack -> {later or 'nothing written'}")
        say(f"  (execution 3 still running, not released; {s.shown()})")
    runs = [(e.worker, e.retries) for e in s.executions()]
    say(f"executions of the task (its receipts): {runs}")
    return finish(
        True,
        "dramatiq-postgres handed out a message another live worker held: worker A, frozen "
        "past heartbeat_ttl and requeued by maintenance, woke and its execution 1 failed; "
        "the Retries middleware's broker.enqueue upserted the message that worker B was "
        f"running back to queued (retries={retry.retries}), and it was claimed again: "
        f"execution 3 ({third.worker}) started while B's execution 2 was still running",
    )


raise SystemExit(run(steps))
