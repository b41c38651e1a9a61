-- name: install
-- The adapter's stand-in for each queue manager's in-memory `job_context` (the jobs it
-- is running): the adapter keeps no state between calls except in the database.
create table leasecheck_pgqueuer_running (
    queue_manager_id uuid not null,
    job_id bigint not null,
    primary key (queue_manager_id, job_id)
)

-- name: reset
-- Forget what every queue manager was running, between examples.
delete from leasecheck_pgqueuer_running

-- name: running_here
-- The jobs a queue manager's job_context holds (run, as pgqueuer's own statements, by
-- its driver, with `$n` placeholders).
select job_id from leasecheck_pgqueuer_running where queue_manager_id = $1

-- name: remember
-- QueueManager.run: `self.job_context[job.id] = context` when it dispatches a job.
insert into leasecheck_pgqueuer_running (queue_manager_id, job_id) values ($1, $2)
on conflict do nothing

-- name: forget
-- QueueManager.forget_job (the dispatch task ended) and the retry path's pop.
delete from leasecheck_pgqueuer_running where queue_manager_id = $1 and job_id = $2

-- name: state
-- The job's status: its queue row while it has one, else the last final status logged
-- for it (`log_jobs` deletes the row and logs successful/exception/canceled/deleted).
select coalesce(
    (select status::text from pgqueuer where id = %(id)s),
    (
        select status::text from pgqueuer_log
        where job_id = %(id)s and status not in ('queued', 'picked')
        order by id desc
        limit 1
    )
)
