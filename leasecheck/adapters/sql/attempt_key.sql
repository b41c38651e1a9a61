-- attempt-key as a queue file (mutants/attempt_key.py): fenced and heartbeating, but the
-- idempotency key is derived from the attempt instead of the job. Must die on unique-effects.
-- leasecheck: name=attempt_key.sql max_attempts=3 ordered_tokens=true heartbeats=true

-- name: install
-- One table of jobs claimed with FOR UPDATE SKIP LOCKED, and the partial index the claim scans.
create table jobs (
    id           bigint generated always as identity primary key,
    payload      jsonb not null,
    status       text not null default 'queued'
                 check (status in ('queued', 'running', 'done', 'failed')),
    attempt      integer not null default 0 check (attempt >= 0),
    max_attempts integer not null default 3 check (max_attempts > 0),
    locked_by    text,
    lease_until  timestamptz,
    last_error   text,
    created_at   timestamptz not null default now(),
    finished_at  timestamptz,
    check ((status = 'running') = (lease_until is not null and locked_by is not null))
);
create index jobs_claimable on jobs (id) where status in ('queued', 'running')

-- name: reset
-- Remove every job, and start the next example alike (TRUNCATE: fresh files, ids from 1).
truncate jobs restart identity

-- name: enqueue
-- Add one job; it is claimable at once.
insert into jobs (payload, max_attempts)
values (%(payload)s, %(max_attempts)s)
returning id

-- name: claim
-- Give the oldest claimable job to a worker, and fail for good the expired ones that used their last attempt.
with exhausted as (
    update jobs
       set status = 'failed', locked_by = null, lease_until = null, finished_at = now(),
           last_error = 'lease expired on the last attempt'
     where id in (select id from jobs
                   where status = 'running' and lease_until < now() and attempt >= max_attempts
                   for update skip locked)
), next as (
    select id from jobs
     where status = 'queued'
        or (status = 'running' and lease_until < now() and attempt < max_attempts)
     order by id
     limit 1
     for update skip locked
)
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s
  from next
 where jobs.id = next.id
returning jobs.id, jobs.attempt

-- name: heartbeat
-- Extend the lease, only while this attempt still owns the running job.
update jobs
   set lease_until = now() + %(lease)s
 where id = %(id)s and attempt = %(token)s and status = 'running'
returning id

-- name: complete
-- Mark the job done, only for the attempt that owns it; the harness's effect runs in the same transaction.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s and attempt = %(token)s and status = 'running'
returning id

-- name: fail
-- Give the job back for a retry, or fail it for good on its last attempt; only the owning attempt may.
update jobs
   set status = case when attempt >= max_attempts then 'failed' else 'queued' end,
       finished_at = case when attempt >= max_attempts then now() end,
       locked_by = null, lease_until = null, last_error = %(error)s
 where id = %(id)s and attempt = %(token)s and status = 'running'
returning id

-- name: effect_key
-- The bug: the key changes with every attempt, so a receiver cannot deduplicate.
select 'job-' || %(id)s::text || '-attempt-' || %(token)s::text
