-- The reference queue's semantics written with the v2 features of adapters/sqlfile_queue.py,
-- the way real libraries ship them: recovery is a sweep of its own (maintain), not part of
-- the claim; the claim is a function answering an all-NULL row when nothing is free; the
-- lease is set per job when it is enqueued (as pg-boss does); install is a chain of steps.
-- The attempt counter is the fencing token; the idempotency key comes from the job id.
-- A swept job keeps its last owner: until someone claims it again, that late owner may
-- still heartbeat, complete or fail it, as in the reference (so revokes_expired stays false).
-- leasecheck: name=reference_v2.sql max_attempts=3 ordered_tokens=true heartbeats=true
-- leasecheck: held_transactions=true

-- name: install
-- Step 1, one transaction: the jobs table, the errors it keeps, and the claim function.
create table jobs (
    id           bigint generated always as identity primary key,
    payload      jsonb not null,
    status       text not null default 'queued'
                 check (status in ('queued', 'running', 'done', 'failed')),
    attempt      integer not null default 0 check (attempt >= 0),
    max_attempts integer not null check (max_attempts > 0),
    lease        interval not null check (lease > '0 s'),
    locked_by    text,
    lease_until  timestamptz,
    finished_at  timestamptz,
    check ((status = 'running') = (lease_until is not null)),
    check (status <> 'running' or locked_by is not null)
);
create table job_errors (
    job_id  bigint not null references jobs on delete cascade,
    attempt integer not null,
    error   text not null,
    primary key (job_id, attempt)
);
-- 'Free' jobs only: an expired one waits for the sweep. Answers NULL when none is free.
create function claim_job(worker text) returns jobs language sql as $$
    update jobs
       set status = 'running', attempt = attempt + 1, locked_by = worker,
           lease_until = now() + jobs.lease
     where id = (select id from jobs where status = 'queued'
                  order by id limit 1 for update skip locked)
    returning *;
$$

-- name: install
-- Step 2, alone (it cannot run inside a transaction block): the index the claim scans.
create index concurrently jobs_claimable on jobs (id) where status = 'queued'

-- name: reset
-- Remove every job and error, and start the next example alike (TRUNCATE: fresh files,
-- ids from 1).
truncate job_errors, jobs restart identity

-- name: enqueue
-- Add one job with the queue's lease; it is claimable at once.
insert into jobs (payload, max_attempts, lease)
values (%(payload)s, %(max_attempts)s, %(lease)s)
returning id

-- name: claim
-- Give the oldest queued job to a worker; the function answers an all-NULL row when none is free.
-- leasecheck: accepted=not_null
select id, attempt from claim_job(%(worker)s)

-- name: heartbeat
-- Extend the lease while this attempt owns the job (swept but not yet claimed again counts).
-- leasecheck: accepted=first_column_true
with beat as (
    update jobs
       set status = 'running', lease_until = now() + %(lease)s
     where id = %(id)s and attempt = %(token)s
       and (status = 'running' or (status = 'queued' and locked_by is not null))
    returning id
)
select exists (select from beat)

-- name: complete
-- Mark the job done, only for the attempt that owns it; answers how many rows it changed.
-- leasecheck: accepted=first_column_positive
with done as (
    update jobs
       set status = 'done', locked_by = null, lease_until = null, finished_at = now()
     where id = %(id)s and attempt = %(token)s
       and (status = 'running' or (status = 'queued' and locked_by is not null))
    returning id
)
select count(*) from done

-- name: fail
-- Keep the error, then give the job back or fail it for good at its cap; only its owner may.
-- leasecheck: accepted=rowcount
insert into job_errors (job_id, attempt, error)
select id, attempt, %(error)s from jobs
 where id = %(id)s and attempt = %(token)s
   and (status = 'running' or (status = 'queued' and locked_by is not null));
update jobs
   set status = case when attempt >= max_attempts then 'failed' else 'queued' end,
       finished_at = case when attempt >= max_attempts then now() end,
       locked_by = null, lease_until = null
 where id = %(id)s and attempt = %(token)s
   and (status = 'running' or (status = 'queued' and locked_by is not null))

-- name: maintain
-- The recovery sweep: an expired job goes back to the queue (its owner kept), or fails for good at its cap.
update jobs
   set status = case when attempt >= max_attempts then 'failed' else 'queued' end,
       finished_at = case when attempt >= max_attempts then now() end,
       locked_by = case when attempt >= max_attempts then null else locked_by end,
       lease_until = null
 where id in (select id from jobs where status = 'running' and lease_until < now()
               for update skip locked)

-- name: state
-- The job's status as its row shows it.
select status from jobs where id = %(id)s

-- name: effect_key
-- The idempotency key: from the job id, never the attempt.
select 'job-' || %(id)s::text
