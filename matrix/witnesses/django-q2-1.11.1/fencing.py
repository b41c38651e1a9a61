"""fencing, django-q2 1.11.1 (ORM broker): a cluster whose delivery ran out is still heard.

Replays matrix/results/counterexamples/django-q2-1.11.1/fencing.txt: w0 claims job1 and
stalls past its lease; at t=30s w1 claims job1 again; w0 resumes and its completion is
accepted, and w1's completion of the delivery it holds is then rejected (its result is
dropped). Here with django-q2's own `qcluster` processes (`_story.py`): cluster A's
monitor stalls on a row lock after A ran task T, A is frozen, T's `lock` runs out and
cluster B dequeues T; A is thawed and its monitor saves A's result and acknowledges,
deleting the queue row while B is still running T. When B ends, its success is not
saved: `fetch(T)` keeps A's result.

Why a bug and not the documented double execution: the docs (configure.rst, `retry`)
say a task that outlives `retry` is presented again and may run more than once. They do
not say that the earlier delivery, once it ran out, still owns the task's outcome. The
dequeue takes a delivery with a compare-and-set on `lock` (django_q/brokers/orm.py:74-79),
so the broker knows which delivery is current, but the acknowledgement deletes the row
by primary key alone (orm.py:89-93, `filter(pk=task_id).delete()`) and `save_task`
writes by task id (django_q/monitor.py:124-146), keeping the first success for good
(monitor.py:126: `if not task_obj.success`). So the expired delivery's acknowledgement
removes the live delivery's row while it runs, and the live delivery's result is
discarded without a word (its monitor logs "Processed").
"""

import sys

from _story import finish, run


def main(dsn: str) -> int:
    story = run(dsn, fail=False, max_attempts=3)
    if story is None:
        return finish(False, "the story could not be played (see the lines above)")
    if not story.row_gone_while_b_ran:
        return finish(False, "A's acknowledgement did not land while B was running T")
    if story.b_result_kept or "cluster A" not in story.final:
        return finish(False, f"B's result was saved after all ({story.final})")
    return finish(
        True,
        "cluster A's delivery of T had run out and cluster B had dequeued T; A's monitor "
        "saved A's success and acknowledged it, deleting the queue row while B was still "
        f"running T, and B's own success was then dropped: fetch(T) -> {story.final}",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
