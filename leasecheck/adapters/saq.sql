-- name: install
-- The adapter's own bookkeeping: a rising priority per enqueued job, so that jobs come
-- out in enqueue order (saq orders its dequeue by priority, then by `scheduled`, which
-- is whole seconds: jobs enqueued within one second would tie, in heap order).
create sequence leasecheck_saq_push minvalue 0 start 0

-- name: reset
-- Forget every job and worker's stats, and start the enqueue order again, between
-- examples (TRUNCATE ... RESTART IDENTITY also restarts saq's own `lock_key` serial).
truncate saq_jobs, saq_stats restart identity;
alter sequence leasecheck_saq_push restart

-- name: next_priority
-- The priority of the next enqueued job: after every earlier one's (saq dequeues the
-- lowest first), within saq's default range (0, 32767).
select (nextval('leasecheck_saq_push') % 32767)::int
