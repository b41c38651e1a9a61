-- name: supported
-- Whether this server can put statistics back (PostgreSQL 18's stats functions).
select to_regproc('pg_catalog.pg_restore_relation_stats') is not null
   and to_regproc('pg_catalog.pg_clear_attribute_stats') is not null

-- name: tables
-- The queue's tables (every table this role owns outside the catalogs and the harness's
-- schema), with the statistics the planner reads now.
select n.nspname, c.relname, c.relpages, c.reltuples, c.relallvisible,
       exists (select 1 from pg_stats s
                where s.schemaname = n.nspname and s.tablename = c.relname) as has_columns
  from pg_class c
  join pg_namespace n on n.oid = c.relnamespace
 where c.relkind in ('r', 'p', 'm')
   and n.nspname not in ('pg_catalog', 'information_schema', 'leasecheck')
   and n.nspname not like 'pg\_toast%'
   and n.nspname not like 'pg\_temp%'
   and pg_has_role(c.relowner, 'USAGE')
 order by n.nspname, c.relname

-- name: analyze
-- ANALYZE one table as it is now: the planner then believes what it holds at this moment.
select format('analyze %%I.%%I', %(schema)s::text, %(rel)s::text)

-- name: restore_relation
-- Put a table's page and row counts back as they were before the first replan.
select pg_catalog.pg_restore_relation_stats(
    'schemaname', %(schema)s::text, 'relname', %(rel)s::text,
    'relpages', %(relpages)s::integer, 'reltuples', %(reltuples)s::real,
    'relallvisible', %(relallvisible)s::integer)

-- name: clear_columns
-- Drop the column statistics an ANALYZE left on a table that had none before.
select pg_catalog.pg_clear_attribute_stats(%(schema)s::text, %(rel)s::text, a.attname, false)
  from pg_attribute a
 where a.attrelid = format('%%I.%%I', %(schema)s::text, %(rel)s::text)::regclass
   and a.attnum > 0 and not a.attisdropped
