-- name: enqueue
-- A job through graphile-worker's public SQL API (add_job), with the harness's retry cap.
select id from graphile_worker.add_job('leasecheck', %(payload)s::json, max_attempts => %(max_attempts)s)

-- name: reset_0_13
-- Forget every job and named queue between examples (0.13's tables).
delete from graphile_worker.jobs;
delete from graphile_worker.job_queues

-- name: reset_0_18
-- Forget every job and named queue between examples (0.18's tables; the task stays).
delete from graphile_worker._private_jobs;
delete from graphile_worker._private_job_queues

-- name: state_0_13
-- The job's row as 0.13 keeps it: gone once completed; locked while a worker runs it.
select locked_at is not null as locked,
       locked_at < now() - %(lock_timeout)s as expired,
       attempts >= max_attempts as exhausted
  from graphile_worker.jobs where id = %(id)s

-- name: state_0_18
-- The job's row as 0.18 keeps it: gone once completed; locked while a worker runs it.
select locked_at is not null as locked,
       locked_at < now() - %(lock_timeout)s as expired,
       attempts >= max_attempts as exhausted
  from graphile_worker._private_jobs where id = %(id)s
