-- Named queries of the mutants: each is a reference query with one thing wrong.

-- name: complete_unfenced
-- naive / heartbeat-only: mark the job done whoever asks.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s
returning id

-- name: claim_without_row_lock
-- no-row-lock: pick the oldest claimable id without FOR UPDATE, then update by id alone.
update jobs
   set status = 'running', attempt = attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s
 where id = (select id from jobs
              where status = 'queued'
                 or (status = 'running' and lease_until < now() and attempt < max_attempts)
              order by id
              limit 1)
returning id, attempt

-- name: complete_fenced_by_clock
-- clock-fence: accept a completion while the lease has not run out, whoever asks.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s and status = 'running' and lease_until > now()
returning id

-- name: claim_without_cap
-- no-retry-cap: reclaim expired jobs whatever their attempt count. (The pick is a CTE,
-- as in the reference: a LIMIT 1 ... SKIP LOCKED subquery in FROM may be run again for
-- every row under a nested-loop plan and take several jobs in one claim.)
with next as (
    select id from jobs
     where status = 'queued' or (status = 'running' and lease_until < now())
     order by id limit 1 for update skip locked
)
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s
  from next
 where jobs.id = next.id
returning jobs.id, jobs.attempt

-- name: fail_without_cap
-- no-retry-cap: every failure is retried.
update jobs
   set status = 'queued', locked_by = null, lease_until = null, last_error = %(error)s
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: heartbeat_unfenced
-- unfenced-heartbeat: extend the lease of the running job, whichever attempt asks.
update jobs
   set lease_until = now() + %(lease)s
 where id = %(id)s and status = 'running'
returning id

-- name: fail_unfenced
-- unfenced-fail: put the job back whichever attempt reports the failure.
update jobs
   set status = case when attempt >= max_attempts then 'failed' else 'queued' end,
       locked_by = null, lease_until = null, last_error = %(error)s
 where id = %(id)s and status = 'running'
returning id

-- name: fail_gives_up
-- fail-gives-up: the first failure is final, whatever the promised cap.
update jobs
   set status = 'failed', locked_by = null, lease_until = null, finished_at = now(),
       last_error = %(error)s
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: complete_only_within_lease
-- strict-lease: fenced on the attempt, and also refused once the lease has run out.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s and attempt = %(attempt)s and status = 'running' and lease_until >= now()
returning id

-- name: reaper_expired
-- reaper-by-id: the reaper's first statement, which finds expired jobs (attempts left).
select id from jobs
 where status = 'running' and lease_until < now() and attempt < max_attempts

-- name: reaper_reset_by_id
-- reaper-by-id: its second statement puts them back by id only, not re-checking that they
-- are still running and still expired.
update jobs
   set status = 'queued', locked_by = null, lease_until = null
 where id = any(%(ids)s)

-- name: lifeline_rescue
-- lifeline-by-age: rescue running jobs claimed longer than a lease ago, whatever their
-- heartbeats say.
update jobs
   set status = 'queued', locked_by = null, lease_until = null
 where status = 'running' and claimed_at < now() - %(lease)s and attempt < max_attempts

-- name: claim_without_giving_up
-- limbo-at-cap: the reference claim without its first step, so a job whose lease ran out
-- on its last attempt is neither handed out nor failed: it stays running forever.
with next as (
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

-- name: release_by_id
-- stale-release: "make it visible again" by id, before the fenced failure report; a
-- stale worker's release ends the lease of whoever holds the job now.
update jobs
   set lease_until = now() - interval '1 second'  -- visible at once
 where id = %(id)s and status = 'running'

-- name: complete_many_first_fenced
-- batch-first-fence: the batch's first claim is checked against its attempt; the rest
-- are marked done by id, whichever attempt they carry.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where status = 'running'
   and id = any(%(ids)s::bigint[])
   and exists (select 1 from jobs first
                where first.id = %(first_id)s and first.attempt = %(first_attempt)s
                  and first.status = 'running')
returning id

-- name: complete_many_by_worker
-- batch-by-worker: a batch is matched by the worker that sends it, not by attempt.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where status = 'running' and id = any(%(ids)s::bigint[]) and locked_by = %(worker)s
returning id

-- name: claim_without_recovery
-- no-recovery: hand out only queued jobs; a job whose worker died stays running for good.
with next as (
    select id from jobs
     where status = 'queued'
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

-- name: read_attempt
-- check-then-act: the completion's check, a statement of its own (autocommit).
select attempt from jobs where id = %(id)s and status = 'running'

-- name: complete_by_id
-- check-then-act: the completion's act, by id alone, trusting the check before it.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s

-- name: sweep_read_expired
-- sweep-undoes: the sweep's read, FOR UPDATE in autocommit (the lock ends with the statement).
select id from jobs
 where status = 'running' and lease_until < now() and attempt < max_attempts
   for update

-- name: sweep_requeue_by_id
-- sweep-undoes: the sweep's write, whatever the job's status is by now.
update jobs set status = 'queued', locked_by = null, lease_until = null where id = any(%(ids)s)

-- name: heartbeat_reviving
-- heartbeat-revives: fenced on the attempt but not on the status, and it writes the status
-- back to running "to be safe": a beat that waited out its own worker's completion revives
-- the finished job.
update jobs
   set lease_until = now() + %(lease)s, status = 'running', locked_by = %(worker)s
 where id = %(id)s and attempt = %(attempt)s
returning id

-- name: claim_early
-- early-reclaim: a lease that runs out within the next half second counts as run out.
with exhausted as (
    update jobs
       set status = 'failed', locked_by = null, lease_until = null, finished_at = now(),
           last_error = 'lease expired on the last attempt'
     where id in (select id from jobs
                   where status = 'running' and lease_until < now() + interval '500 milliseconds'
                     and attempt >= max_attempts
                   for update skip locked)
), next as (
    select id from jobs
     where status = 'queued'
        or (status = 'running' and lease_until < now() + interval '500 milliseconds'
            and attempt < max_attempts)
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

-- name: complete_done_only
-- ack-then-work: the reference's fenced completion, committed on its own (autocommit);
-- the effect runs afterwards, in a transaction of its own.
update jobs
   set status = 'done', locked_by = null, lease_until = null, finished_at = now()
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: claim_with_schedule
-- minute-key: the reference claim, also returning the job's kind and the minute it was
-- scheduled (its creation), which the queue's idempotency key is built from.
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
returning jobs.id, jobs.attempt, jobs.payload ->> 'kind', date_trunc('minute', jobs.created_at)

-- name: claim_two
-- claims-two: the reference claim with `limit 2`: two jobs marked running, one handed out.
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
     limit 2
     for update skip locked
)
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s, claimed_at = now()
  from next
 where jobs.id = next.id
returning jobs.id, jobs.attempt

-- name: claim_in_subquery
-- in-subquery-claim: the pick as `where id in (select ... limit 1 for update skip locked)`
-- (odd-jobs #115, conductor #369). Under a nested-loop semi-join, which the planner picks
-- once statistics say `jobs` is tiny, the pick runs again for every row of `jobs` and
-- each run takes the next job: one call marks several running and hands out one.
with exhausted as (
    update jobs
       set status = 'failed', locked_by = null, lease_until = null, finished_at = now(),
           last_error = 'lease expired on the last attempt'
     where id in (select id from jobs
                   where status = 'running' and lease_until < now() and attempt >= max_attempts
                   for update skip locked)
)
update jobs
   set status = 'running', attempt = attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s, claimed_at = now()
 where id in (select id from jobs
               where status = 'queued'
                  or (status = 'running' and lease_until < now() and attempt < max_attempts)
               order by id
               limit 1
               for update skip locked)
returning id, attempt

-- name: claim_from_subquery
-- from-subquery-claim: the pick as a subquery in FROM, `update ... from (select id ...
-- limit 1 for update skip locked) as next where jobs.id = next.id`. Under a nested loop
-- with `jobs` outside, which the planner picks once statistics say `jobs` is tiny, the
-- subquery is scanned again for every row of `jobs`; each rescan re-checks the row it
-- locked, finds it taken by this very statement, and locks the next: one call marks
-- several running and hands out one. A CTE (the reference's `next`) is scanned once.
with exhausted as (
    update jobs
       set status = 'failed', locked_by = null, lease_until = null, finished_at = now(),
           last_error = 'lease expired on the last attempt'
     where id in (select id from jobs
                   where status = 'running' and lease_until < now() and attempt >= max_attempts
                   for update skip locked)
)
update jobs
   set status = 'running', attempt = jobs.attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s, claimed_at = now()
  from (select id from jobs
         where status = 'queued'
            or (status = 'running' and lease_until < now() and attempt < max_attempts)
         order by id
         limit 1
         for update skip locked) as next
 where jobs.id = next.id
returning jobs.id, jobs.attempt

-- name: release_mine
-- recover-by-name: a worker asking for work holds none, so whatever is still marked as
-- its own was left by a process that died: hand it back now, not when its lease ends.
update jobs
   set status = 'queued', locked_by = null, lease_until = null
 where locked_by = %(worker)s and status = 'running'

-- name: failures_column
-- The failure-capped queue (`mutants._failure_capped`): claims are not capped, so a job
-- may have no max_attempts, and each job counts the failure reports it accepted.
alter table jobs
    alter column max_attempts drop not null,
    add column failures integer not null default 0

-- name: fail_counted
-- The failure-capped queue: count the report, and give the job up for good at the cap-th
-- (the SET reads the row as it was, so `failures + 1` is this report); only the owning
-- attempt may.
update jobs
   set failures = failures + 1,
       status = case when failures + 1 >= %(cap)s then 'failed' else 'queued' end,
       finished_at = case when failures + 1 >= %(cap)s then now() end,
       locked_by = null, lease_until = null, last_error = %(error)s
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: fail_counted_late
-- failure-cap-late: gives the job up one report past its cap (`>` for `>=`).
update jobs
   set failures = failures + 1,
       status = case when failures + 1 > %(cap)s then 'failed' else 'queued' end,
       finished_at = case when failures + 1 > %(cap)s then now() end,
       locked_by = null, lease_until = null, last_error = %(error)s
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id

-- name: fail_counting_claims
-- failure-cap-counts-claims: gives the job up once it was claimed cap times, however few
-- of those failed: a delivery lost to a crash or an expired lease counts as a failure.
update jobs
   set failures = failures + 1,
       status = case when attempt >= %(cap)s then 'failed' else 'queued' end,
       finished_at = case when attempt >= %(cap)s then now() end,
       locked_by = null, lease_until = null, last_error = %(error)s
 where id = %(id)s and attempt = %(attempt)s and status = 'running'
returning id
