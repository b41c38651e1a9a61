-- name: table
-- Where pg-boss keeps the queue's jobs (the shared table, for a queue without partition).
select table_name from pgboss.queue where name = %(queue)s

-- name: reset
-- Forget every job of the queue between examples.
delete from pgboss.job where name = %(queue)s

-- name: state
-- The job's state as pg-boss records it.
select state::text from pgboss.job where id = %(id)s::uuid
