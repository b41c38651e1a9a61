-- name: install
-- The adapter's own bookkeeping: which procrastinate worker row each simulated worker
-- registered (the contract keeps no state between calls except in the database).
create table leasecheck_procrastinate_worker (
    name      text primary key,
    worker_id bigint not null
);

-- name: reset
-- Forget every job, event, worker and the adapter's worker map, between examples.
delete from procrastinate_periodic_defers;
delete from procrastinate_jobs;
delete from procrastinate_workers;
delete from leasecheck_procrastinate_worker

-- name: worker_id
-- The procrastinate worker row a simulated worker registered, if any.
select worker_id from leasecheck_procrastinate_worker where name = %(name)s

-- name: remember_worker
-- Record the worker row a simulated worker just registered.
insert into leasecheck_procrastinate_worker (name, worker_id) values (%(name)s, %(worker_id)s)

-- name: holds
-- Whether the worker's heartbeat keeps this execution of the job from being stalled: its
-- row exists (prune_stalled_workers deletes it) and the job is still `doing` under it,
-- with the attempts it was fetched with (select_stalled_jobs_by_heartbeat's terms).
select 1
  from procrastinate_workers w
  join procrastinate_jobs j on j.worker_id = w.id
 where w.id = %(worker_id)s and j.id = %(job_id)s and j.status = 'doing'
   and j.attempts = %(attempts)s

-- name: idle_workers
-- Registered workers still in procrastinate_workers that hold no job in `doing`.
select m.worker_id
  from leasecheck_procrastinate_worker m
  join procrastinate_workers w on w.id = m.worker_id
 where not exists (
       select 1 from procrastinate_jobs j where j.worker_id = m.worker_id and j.status = 'doing'
 )
 order by m.worker_id

-- name: status
-- A job's status as procrastinate records it.
select status::text from procrastinate_jobs where id = %(job_id)s
