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
