"""no-lost-jobs, saq 0.26.4: at the end saq shows the job done, but done twice.

Replays matrix/results/counterexamples/saq-0.26.4/no-lost-jobs.txt: worker w1 claims
job1 and stands still past saq's heartbeat; the sweep re-queues job1, w0 takes it and
completes it (accepted); then w1 wakes and completes job1 as well (accepted). After
the drain saq shows job1 `complete`, completed by two executions: not "done once".
No job is lost here: this is the double completion of single-completion, judged on
the final state (the matrix excused single-completion before this run), and this cell
stands for the same bug. Here with saq's own worker processes (`_saq.py`): worker A's
execution 1 is frozen (SIGSTOP), saq's sweep re-queues the job after its 5 s abort
wait, worker B runs it as execution 2 and completes it; then A is thawed and
execution 1 returns: saq writes a second completion over the first.

Why a bug: as in single-completion.py. The sweep gives up on the frozen execution
(`saq/queue/postgres.py` lines 444-450) without revoking it, and its completion
(`saq/worker.py` lines 376-377) is written by `_update` `WHERE key = %(key)s`
(postgres.py lines 471-476) over the job B had already completed: the job's final
row records the stale attempt's completion (attempts=1, worker A, its result) in place
of B's, and saq counts two completions (`saq/queue/base.py` lines 307-308).
"""

from _saq import Story, finish, owner_then_stale, run, say


async def steps(s: Story) -> int:
    if await owner_then_stale(s) is None:
        return finish(False, "the two completions were not both written")
    final = s.row()  # stable now: neither execution is running, nothing heartbeats
    counted = await s.counted("A", "complete", 1) and await s.counted("B", "complete", 1)
    stats = {w: v.get("complete") for w, v in s.stats().items()}
    say(f"final: {s.shown(final)}")
    say(f"saq_stats, completions counted per worker: {stats}")
    say(f"executions of the job's task (its receipts): {s.executions()}")
    if final["status"] != "complete" or final["worker_id"] != "A" or not counted:
        return finish(False, f"the job did not end done twice ({s.shown(final)})")
    return finish(
        True,
        "at the end saq shows the job complete, but completed twice: worker B completed it, "
        "then the execution saq's sweep had given up on (worker A's, frozen) completed it "
        "again, written by key over B's completion, so the final row records A's attempt 1 "
        f"and both workers count a completion ({stats}); the same double completion as "
        "single-completion, seen in the final state",
    )


raise SystemExit(run(steps))
