-- name: install
-- The adapter's own bookkeeping: a falling priority per pushed job, so that jobs come
-- out in push order (chancy breaks priority ties by uuid7 id, random within a millisecond).
create sequence leasecheck_chancy_push

-- name: reset
-- Forget every job and worker, and start the push order again, between examples.
delete from chancy_jobs;
delete from chancy_workers;
delete from chancy_leader;
alter sequence leasecheck_chancy_push restart

-- name: next_priority
-- The priority of the next pushed job: lower than every earlier one's.
select -nextval('leasecheck_chancy_push')::int

-- name: state
-- The job's state as chancy's own table shows it.
select state from chancy_jobs where id = %(id)s

-- name: holds_claim
-- 0.26.0 and later: the row is still running under this claim's claim_id (recovery
-- sets it NULL, a new fetch replaces it).
select 1 from chancy_jobs where id = %(id)s and state = 'running' and claim_id = %(claim_id)s

-- name: holds_execution
-- 0.25.1 (no claim_id): the row is still running, taken by this worker, since this
-- fetch (recovery sets taken_by and started_at NULL; a new fetch sets started_at again).
select 1 from chancy_jobs
where id = %(id)s and state = 'running' and taken_by = %(worker)s and started_at = %(started_at)s
