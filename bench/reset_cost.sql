-- name: clone
-- A fresh database copied from the template ({} are identifiers, the strategy a literal).
create database {} template {} strategy {}

-- name: mark
-- The suite's marker, so janitor.drop and janitor.leftovers know the database as ours.
comment on database {} is {}

-- name: delete
-- Delete every reference row and the harness's effects, and set the clock back.
delete from receipts;
delete from jobs;
delete from leasecheck.effects;
delete from leasecheck.clock_moves where since > '-infinity';
select setval('leasecheck.clock_at', 0), setval('leasecheck.clock_since', 0)

-- name: truncate
-- Empty the reference tables and the harness's effects; identities keep counting.
truncate receipts, jobs, leasecheck.effects;
delete from leasecheck.clock_moves where since > '-infinity';
select setval('leasecheck.clock_at', 0), setval('leasecheck.clock_since', 0)

-- name: truncate_restart
-- As truncate, and restart the identities.
truncate receipts, jobs, leasecheck.effects restart identity;
delete from leasecheck.clock_moves where since > '-infinity';
select setval('leasecheck.clock_at', 0), setval('leasecheck.clock_since', 0)

-- name: vacuum
-- Reclaim the dead rows DELETE leaves, and their entries in jobs_claimable.
vacuum jobs, receipts, leasecheck.effects

-- name: dead_tuples
-- Dead and live tuples of the jobs table, and the size of the index the claim scans.
select coalesce(s.n_dead_tup, 0), coalesce(s.n_live_tup, 0),
       coalesce(s.autovacuum_count, 0) + coalesce(s.vacuum_count, 0),
       pg_relation_size('jobs_claimable')
  from pg_class c left join pg_stat_user_tables s on s.relid = c.oid
 where c.oid = 'jobs'::regclass

-- name: autovacuum
-- The autovacuum settings the run had, for the report.
select name, setting from pg_settings
 where name in ('autovacuum', 'autovacuum_naptime', 'autovacuum_vacuum_threshold',
                'autovacuum_vacuum_scale_factor')
 order by name
