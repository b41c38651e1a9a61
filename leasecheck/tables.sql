-- name: delete
-- Delete every row of one table (the placeholder is its name).
delete from {}

-- name: restart_identities
-- Restart the sequences the tables (an array literal) own at their start, as TRUNCATE does.
select setval(s.seqrelid, s.seqstart, false)
  from pg_sequence s
  join pg_depend d on d.classid = 'pg_class'::regclass and d.objid = s.seqrelid
 where d.refclassid = 'pg_class'::regclass
   and d.refobjid = any({}::regclass[])
   and d.deptype in ('a', 'i')

-- name: vacuum
-- Remove the dead rows the deletes left and cut the emptied files back to no pages.
vacuum ({}) {}

-- name: emptied
-- Whether every table (an array literal) is back to a file of no pages, as after TRUNCATE.
select coalesce(sum(pg_relation_size(t)), 0) = 0 from unnest({}::regclass[]) as t

-- name: truncate
-- The slow way to the same state: fresh files and restarted identities.
truncate {} restart identity
