-- name: candidate
-- The job a two-step claim means to take: read without a lock, in a statement of its own.
select id from jobs
 where status = 'queued'
    or (status = 'running' and lease_until < now() and attempt < max_attempts)
 order by id
 limit 1

-- name: take
-- The second step: marks the job it read as its own, trusting that read.
update jobs
   set status = 'running', attempt = attempt + 1, locked_by = %(worker)s,
       lease_until = now() + %(lease)s, claimed_at = now()
 where id = %(id)s
returning id, attempt
