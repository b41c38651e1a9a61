-- name: blocked
-- Of the backends given, those that wait on a lock, each with the backends it waits for.
select pid, pg_blocking_pids(pid)
  from unnest(%s::int[]) as pid
 where cardinality(pg_blocking_pids(pid)) > 0
