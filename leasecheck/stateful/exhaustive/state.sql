-- name: tables
-- The tables whose rows are part of an explored state: every ordinary table outside the
-- system schemas (the queue's, whatever they are called, and the harness's own).
select n.nspname, c.relname
  from pg_class c
  join pg_namespace n on n.oid = c.relnamespace
 where c.relkind in ('r', 'p')
   and n.nspname not in ('pg_catalog', 'information_schema')
   and n.nspname not like 'pg\_toast%'
   and n.nspname not like 'pg\_temp%'
 order by 1, 2

-- name: rows
-- One table's rows, in the order a scan without ORDER BY meets them: a digest of what
-- the queue holds, shown or not, but for the columns {ignored} names (random ids,
-- real-time stamps: they differ on every run of one program).
select md5(coalesce(string_agg((to_jsonb(r) - {ignored}::text[])::text, E'\n'
                               order by r.ctid), ''))
  from {table} as r

-- name: sequences
-- Where each sequence stands: a queue whose reset leaves one running on hands the same
-- program other ids on every run, so no two of its states merge.
select schemaname || '.' || sequencename, last_value
  from pg_sequences
 where schemaname not in ('pg_catalog', 'information_schema')
 order by 1

-- name: planner
-- What the planner believes of the tables {tables} names: their pages, rows and
-- all-visible pages, and whether they have column statistics. Between resets only a
-- replan (an ANALYZE) changes them, and the plans the queue's statements get follow
-- them, so two programs alike but for a replan are two states.
select md5(coalesce(string_agg(
         concat_ws(' ', c.oid::regclass, c.relpages, c.reltuples, c.relallvisible,
                   exists (select from pg_stats s
                             join pg_namespace n on n.nspname = s.schemaname
                            where n.oid = c.relnamespace and s.tablename = c.relname)),
         E'\n' order by c.oid::regclass::text), ''))
  from pg_class c
 where c.oid = any({tables}::regclass[])
