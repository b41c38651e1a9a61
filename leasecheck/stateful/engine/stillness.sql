-- name: autovacuum_off
-- Autovacuum off on every table of this database (one the suite created): a VACUUM or
-- ANALYZE it starts when enough rows changed lands at a moment of the clock's choosing,
-- not the program's, and the statistics it leaves change the plans mid-run.
do $$
declare
    t record;
begin
    for t in
        select c.relkind, n.nspname, c.relname
          from pg_class c
          join pg_namespace n on n.oid = c.relnamespace
         where c.relkind in ('r', 'm')
           and n.nspname not in ('pg_catalog', 'information_schema')
           and n.nspname not like 'pg\_toast%'
           and n.nspname not like 'pg\_temp%'
    loop
        begin
            execute format(
                'alter %s %I.%I set (autovacuum_enabled = false%s)',
                case t.relkind when 'm' then 'materialized view' else 'table' end,
                t.nspname, t.relname,
                case t.relkind when 'r' then ', toast.autovacuum_enabled = false' else '' end);
        exception when insufficient_privilege then
            null;  -- not its owner: that table keeps the server's setting
        end;
    end loop;
end
$$

