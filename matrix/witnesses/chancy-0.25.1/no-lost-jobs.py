"""no-lost-jobs, chancy 0.25.1: a job chancy recorded as succeeded is reopened and runs again.

Replays matrix/results/counterexamples/chancy-0.25.1/no-lost-jobs.txt: worker w0
claims job1 and stalls past the lease; the sweeper's Recovery puts it back and w1
fetches it; w0's late completion is accepted (the job is done), then w1's failure is
accepted too, and the job is handed out again. Here with chancy's own workers and
Recovery (see `_two_owners.py`; time: chancy's own `chancy_workers.last_seen` of
worker-a is rewritten 60 s into the past): execution 1 (worker A, recovered) returns
and chancy records the job `succeeded` with its `completed_at`; execution 2 (worker B)
raises and chancy writes `retrying` over that, `completed_at` back to NULL; a worker
fetches the job and starts execution 3. The same script in chancy 0.26.0's venv
prints NOT REPRODUCED.

Why a bug, not a design: chancy 0.25.1's worker writes every job update `WHERE id =
%(id)s` and nothing else, whatever the row says now (`chancy/worker.py`,
`Worker._maintain_updates`, lines 503-519): the recovered execution's success is
written while B owns the job, and B's failure is then written over a job chancy had
already recorded and reported (`Plugin.on_job_updated`) as succeeded, so
`Worker.fetch_jobs` (lines 716-746) hands it out again. chancy treats `succeeded` as
an end: `Chancy.wait_for_job` (`chancy/app.py`, lines 786-813) says "By default, only the
SUCCEEDED and FAILED states are considered complete", so a user who waited on this
job was told it succeeded, and then it ran again; nothing in chancy's docs says a
succeeded job may be reopened. 0.26.0 discards the recovered execution's late update (its
`claim_id` no longer matches, `Worker.flush`; the `Recovery` docstring in
`chancy/plugins/recovery.py`: "Late updates from the old claim are discarded even if
it keeps running"), so there the job is never marked succeeded before B's failure.
"""

import sys

from _stale_worker import say, shown
from _two_owners import Run, main


async def steps(run: Run) -> tuple[bool, str]:
    done = await run.finish(1, fail=False)
    if done is None:
        return False, "execution 1's completion was never reported written"
    wrote, row = done
    say(f"execution 1 (worker A, recovered) returned; chancy wrote state={wrote}")
    say(f"  the row just after: {shown(row)}")
    if wrote != "succeeded" or row["state"] != "succeeded" or row["completed_at"] is None:
        return False, f"execution 1's completion did not mark the job succeeded ({shown(row)})"
    reopened = await run.finish(2, fail=True)
    if reopened is None:
        return False, "execution 2's failure was never reported written"
    wrote, row = reopened
    say(f"execution 2 (worker B) raised; chancy wrote state={wrote} by id")
    say(f"  the row just after: {shown(row)}")
    if row["state"] == "succeeded":
        return False, "worker B's failure was discarded; the job stays succeeded"
    again = await run.fetched_again(3)
    if again is None:
        return False, f"the reopened job was not fetched again ({shown(row)})"
    say(f"execution 3 of the job started -> {shown(again)}")
    return True, (
        "after chancy recorded the job succeeded (the recovered execution's completion), "
        f"worker B's failure was written over it by id, the job went back to {wrote} and "
        f"{again['taken_by']} fetched and ran it a third time: chancy 0.25.1 reopens a "
        "succeeded job"
    )


if __name__ == "__main__":
    sys.exit(main(steps))
