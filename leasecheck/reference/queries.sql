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
       lease_until = now() + %(lease)s, claimed_at = now()
  from next
 where jobs.id = next.id
returning jobs.id, jobs.attempt

-- name: claim_many
-- Give up to n of the oldest claimable jobs to a worker, after failing for good the
-- expired ones that used their last attempt (the claim's own first step).
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
     limit %(n)s
     for update skip locked
)
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s, claimed_at = now()
  from next
 where jobs.id = next.id
returning jobs.id, jobs.attempt

-- name: complete_many
-- Mark done each listed job whose listed attempt owns it; the rest are refused.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
  from unnest(%(ids)s::bigint[], %(attempts)s::integer[]) as batch (id, attempt)
 where jobs.id = batch.id and jobs.attempt = batch.attempt and jobs.status = 'running'
returning jobs.id, batch.attempt

-- name: heartbeat
-- Extend the lease, only while this attempt still owns the running job.
update jobs
   set lease_until = now() + %(lease)s
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: complete
-- Mark the job done, only for the attempt that owns it; the caller's effect runs in the same transaction.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: complete_unfenced
-- The story's bug, kept for the demo's naive and heartbeat workers: done, whoever asks.
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
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: state
-- The job's status as the table shows it: queued, running, done or failed.
select status from jobs where id = %(id)s

-- name: send_receipt
-- Record one receipt; a repeated idempotency key is dropped, as a payment API would.
insert into receipts (job_id, worker, attempt, idempotency_key)
values (%(id)s, %(worker)s, %(attempt)s, %(key)s)
on conflict (idempotency_key) do nothing

-- name: receipts_for
-- Count the receipts a job produced.
select count(*) from receipts where job_id = %(id)s

-- name: job
-- Read one job's bookkeeping.
select id, payload, status, attempt, max_attempts, locked_by, lease_until, last_error
  from jobs where id = %(id)s
