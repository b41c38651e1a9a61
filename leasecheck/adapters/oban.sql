-- name: state
-- A job's state as oban records it.
select state::text from oban_jobs where id = %(job_id)s
