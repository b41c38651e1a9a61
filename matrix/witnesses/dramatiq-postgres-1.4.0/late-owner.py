"""late-owner, dramatiq-postgres 1.4.0: a late ack nobody took over from deletes nothing.

The matrix run of 2026-12-07 (20:04) found a late-owner failure in its fourth run, but
that run ended in a contract error while shrinking it, so the cell reads "error" and no
counterexample file exists yet. This script replays what the property names: a worker
claims job1 and stalls past its lease; maintenance requeues job1, nobody claims it, the
worker resumes and its completion is refused, although no other worker was ever given
the job. Here with dramatiq's own worker processes (`_dramatiq.py`): worker A claims the
message (execution 1) and is frozen (SIGSTOP). Worker M, another deployment's worker on
the same database, runs only the "reports" queue (`--queues reports`): it never claims
a receipt, but its consumers run the broker's maintenance, whose `REAP` covers every
queue of the table. M requeues A's message after `heartbeat_ttl`; no worker claims it
(A is the only worker of the "default" queue). A is thawed and execution 1 returns: A's
ack deletes nothing, the message stays `queued`, and A's own consumer claims it again
and runs it a second time.

Why it is judged a violation: nothing took the message over. `REAP`
(`dramatiq_postgres/broker.py` lines 524-535) un-owns it at once (`"state" = 'queued',
worker_id = NULL`), and the ack (lines 418-425, `DELETE ... WHERE message_id = %s AND
queue_name = %s AND "state" = 'consumed'`) then finds no `consumed` row, so work
finished by the only worker that ever ran it is thrown away and redone. The ack could
have been accepted: the row still names the message, and no other delivery exists. This
is the cost side of the same missing fence as `fencing.py`: without a delivery token,
dramatiq-postgres cannot tell "my late ack, nobody else has it" from "my late ack of a
delivery someone else holds", and the ack by message id alone takes the second as the
first (fencing) while the state test makes the first fail (here).
"""

from _dramatiq import NotThere, Story, finish, frozen_first, run, say


def unclaimed(s: Story) -> None:
    """A's execution 1 frozen; maintenance, run by a worker of another queue, requeues it."""
    mark = frozen_first(s)
    s.start("M", queues=("reports",))
    reap = s.written("maintenance to requeue the message", mark, lambda w: w.statement == "REAP")
    if reap is None:
        raise NotThere("maintenance never requeued A's message")
    say(f"maintenance (M's consumer of 'reports', under the advisory lock): {s.write(reap)}")
    s.wake("A")


def steps(s: Story) -> int:
    requeued = s.writes()[-1]
    if requeued.statement != "REAP" or len(s.executions()) != 1:
        return finish(False, "the message was written or run again after REAP")
    say(f"  nobody claimed it since: the last write is still {s.write(requeued)}")
    s.release(1, "return")
    if not s.acked("A"):
        return finish(False, "worker A never acked execution 1")
    later = s.written_by_ack("A", requeued.n)
    deleted = [w for w in later if w.op == "DELETE"]
    say(
        "worker A: execution 1 returned; consumer.ack -> "
        f"{[s.write(w) for w in later] or 'nothing written'}"
    )
    if deleted:
        return finish(False, "A's late ack deleted the message")
    second = s.running(2)
    if second is None:
        return finish(False, "the message was not run again after A's refused ack")
    runs = [(e.worker, e.retries) for e in s.executions()]
    say(f"executions of the task (its receipts): {runs}")
    return finish(
        True,
        "dramatiq-postgres refused the late ack of the only worker that ever had the "
        "message: maintenance (run by a worker of another queue) requeued frozen worker "
        "A's message and nobody claimed it; A woke, execution 1 returned, and A's ack "
        "deleted nothing (the row was queued, not consumed), so the finished message ran "
        f"again: execution 2 ({second.worker})",
    )


raise SystemExit(run(steps, start=unclaimed))
