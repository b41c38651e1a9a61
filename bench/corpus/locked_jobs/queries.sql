-- name: install
-- A `jobs` table in the Rails/Sidekiq-on-Postgres style: a status enum, `locked_by` and
-- `locked_until`, an `attempts` counter (the fencing token) and a `run_at` for backoff.
create type job_status as enum ('pending', 'locked', 'succeeded', 'dead');
create table jobs (
    id           bigserial primary key,
    queue        text not null default 'default',
    args         jsonb not null,
    status       job_status not null default 'pending',
    attempts     int not null default 0,
    max_attempts int not null,
    run_at       timestamptz not null,
    locked_by    text,
    locked_until timestamptz,
    last_error   text
);
create index jobs_runnable on jobs (run_at, id) where status in ('pending', 'locked')

-- name: reset
-- Empty the table between examples, ids from 1 again.
truncate jobs restart identity

-- name: enqueue
-- A job runs as soon as it is enqueued.
insert into jobs (args, max_attempts, run_at) values (%(args)s, %(max_attempts)s, now())
returning id

-- name: bury_exhausted
-- Jobs whose last attempt's lock ran out are dead: nobody may pick them up again.
update jobs
   set status = 'dead', locked_by = null, locked_until = null,
       last_error = 'lock expired on the last attempt'
 where status = 'locked' and locked_until < now() and attempts >= max_attempts

-- name: lock_next
-- Lock the next due job, or one whose lock ran out with attempts left.
update jobs
   set status = 'locked', attempts = attempts + 1, locked_by = %(worker)s,
       locked_until = now() + %(lease)s
 where id = (
        select id from jobs
         where (status = 'pending' and run_at <= now())
            or (status = 'locked' and locked_until < now() and attempts < max_attempts)
         order by run_at, id
         limit 1
           for update skip locked)
returning id, attempts

-- name: lock_next_uncapped
-- The bug: a job whose lock ran out is picked up again however many attempts it had.
update jobs
   set status = 'locked', attempts = attempts + 1, locked_by = %(worker)s,
       locked_until = now() + %(lease)s
 where id = (
        select id from jobs
         where (status = 'pending' and run_at <= now())
            or (status = 'locked' and locked_until < now())
         order by run_at, id
         limit 1
           for update skip locked)
returning id, attempts

-- name: heartbeat
-- Push the lock forward while this attempt holds the job.
update jobs set locked_until = now() + %(lease)s
 where id = %(id)s and attempts = %(attempts)s and status = 'locked'
returning id

-- name: heartbeat_unfenced
-- The bug: any attempt's heartbeat pushes the lock forward.
update jobs set locked_until = now() + %(lease)s
 where id = %(id)s and status = 'locked'
returning id

-- name: heartbeat_by_worker
-- The bug: the heartbeat is fenced on the worker's name, not on the attempt.
update jobs set locked_until = now() + %(lease)s
 where id = %(id)s and locked_by = %(worker)s and status = 'locked'
returning id

-- name: succeed
-- Mark the job succeeded for the attempt that holds it.
update jobs set status = 'succeeded', locked_by = null, locked_until = null
 where id = %(id)s and attempts = %(attempts)s and status = 'locked'
returning id

-- name: succeed_unfenced
-- The bug: any attempt may mark a locked job succeeded.
update jobs set status = 'succeeded', locked_by = null, locked_until = null
 where id = %(id)s and status = 'locked'
returning id

-- name: retry
-- Back off and retry, or bury the job on its last attempt; only the attempt that holds it.
update jobs
   set status = case when attempts >= max_attempts then 'dead' else 'pending' end::job_status,
       run_at = now() + attempts * interval '2 seconds',
       locked_by = null, locked_until = null, last_error = %(error)s
 where id = %(id)s and attempts = %(attempts)s and status = 'locked'
returning id

-- name: retry_unfenced
-- The bug: any attempt may hand a locked job back (or bury it).
update jobs
   set status = case when attempts >= max_attempts then 'dead' else 'pending' end::job_status,
       run_at = now() + attempts * interval '2 seconds',
       locked_by = null, locked_until = null, last_error = %(error)s
 where id = %(id)s and status = 'locked'
returning id

-- name: status
-- The job's status in the contract's words.
select case status when 'pending' then 'queued' when 'locked' then 'running'
                   when 'succeeded' then 'done' else 'failed' end
  from jobs where id = %(id)s
