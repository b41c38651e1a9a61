-- name: running_here
-- The jobs a queue manager holds picked: what its in-memory job_context knows are
-- still running here (the adapter keeps no state between calls but the database).
select id from pgqueuer where queue_manager_id = %(qm)s and status = 'picked'
