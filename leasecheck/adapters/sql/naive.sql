-- naive as a queue file: the story's first worker (mutants/naive.py). No heartbeat, and a
-- completion fenced by nothing: a job that runs past its lease is reclaimed, and both
-- workers' completions commit. Must die on single-completion (or fencing).
-- leasecheck: name=naive.sql max_attempts=3 ordered_tokens=true heartbeats=false

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

-- name: complete
-- The bug: mark the job done whoever asks, fenced by nothing.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s
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
-- The idempotency key: from the job id, never the attempt.
select 'job-' || %(id)s::text
