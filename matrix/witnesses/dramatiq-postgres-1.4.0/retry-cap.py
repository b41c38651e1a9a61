"""retry-cap, dramatiq-postgres 1.4.0: a message given up after its last retry runs again.

Replays matrix/results/counterexamples/dramatiq-postgres-1.4.0/retry-cap.txt: job1's
deliveries are requeued by maintenance from stalled workers while their failure reports
go on being accepted, each with its own delivery's retry count, and job1 is claimed
again after the queue has accepted 3 failure reports (the actor's `max_retries=2`: the
third failure gives the message up). Here with dramatiq's own worker processes
(`_dramatiq.py`): worker A's execution 1 is frozen (SIGSTOP), B's maintenance requeues
the message after `heartbeat_ttl` and B claims it (execution 2, retries=0); A is
thawed. Execution 1 raises (failure 1, retries=1): the retry re-queues the message B
is running, and A runs it again, execution 3, which raises (failure 2, retries=2), and
execution 4, which raises (failure 3): dramatiq's Retries middleware logs "Retries
exceeded", fails the message and A's nack writes it `rejected`. Then B's execution 2,
which was running all along, raises: its copy of the message still says retries=0, so
Retries re-enqueues it (retries=1), the rejected message goes back to `queued`, and it
is claimed and run a fifth time.

Why a bug and not a design: the cap is the message's own count, `message.options
["retries"]`, which each delivery carries in its copy of the message and increments in
dramatiq's Retries middleware (`dramatiq/middleware/retries.py` lines 108-122) before
`broker.enqueue` writes the copy back (line 148). dramatiq-postgres writes it with an
upsert by message id (`dramatiq_postgres/broker.py` lines 455-474, `ENQUEUE`: `ON
CONFLICT (message_id) DO UPDATE SET "state" = 'queued', message = EXCLUDED.message,
...`), whatever the row's state and whoever holds it: a `rejected` row, which the
README keeps "for inspection" as failed for good, included. So once maintenance has
given a message to a second worker, the two deliveries count retries apart, and the
one with the lower count re-opens a message the other has given up; with `max_retries
=2` the message here fails four times and is still run again.
"""

from _dramatiq import NotThere, Story, finish, run, say, stale_failure

MAX_RETRIES = 2


def fail_again(s: Story, n: int, statement: str, state: str) -> None:
    """Release execution n (run by A) to raise; wait for A's write of its failure."""
    mark = s.last_write()
    s.release(n, "raise")
    w = s.written(
        f"A's write of execution {n}'s failure",
        mark,
        lambda w: w.statement == statement and w.state == state and w.by == "A",
    )
    if w is None or w.by != "A":
        raise NotThere(f"execution {n}'s failure was not written as {statement} by A")
    say(f"worker A: execution {n} raised -> {s.write(w)}")


def steps(s: Story) -> int:
    stale_failure(s)
    for n, statement, state in ((3, "ENQUEUE", "queued"), (4, "NACK", "rejected")):
        run_n = s.running(n)
        if run_n is None or run_n.worker != "A":
            return finish(False, f"A did not run the message again (execution {n})")
        fail_again(s, n, statement, state)
    if not s.acked("A", "nack") or s.acks("B") or s.acks("B", "nack"):
        return finish(False, "A did not nack the message, or B's execution 2 had ended")
    say(
        f"  3 failures (max_retries={MAX_RETRIES}): the message is given up while B's "
        f"execution 2 still runs; {s.shown()}"
    )
    mark = s.last_write()
    s.release(2, "raise")
    back = s.written(
        "B's retry", mark, lambda w: w.statement == "ENQUEUE" and w.queue_name.endswith(".DQ")
    )
    if back is None or back.by != "B":
        return finish(False, "B's failure did not re-enqueue the rejected message")
    say(f"worker B: execution 2 raised; Retries -> broker.enqueue -> {s.write(back)}")
    fifth = s.running(5)
    if fifth is None:
        return finish(False, "the re-queued message was not claimed again")
    runs = s.executions()
    say(f"executions of the task (its receipts): {[(e.worker, e.retries) for e in runs]}")
    return finish(
        True,
        f"dramatiq-postgres ran a message again after it had been given up: with "
        f"max_retries={MAX_RETRIES}, worker A's executions 1, 3 and 4 failed (the last "
        "one's nack wrote the message rejected, 'Retries exceeded'), while worker B, given "
        "the message by maintenance, was still running execution 2; its failure then "
        f"upserted the rejected message back to queued with retries={back.retries}, and it "
        f"was claimed again: execution 5 ({fifth.worker}), after 4 failures",
    )


raise SystemExit(run(steps, max_retries=MAX_RETRIES))
