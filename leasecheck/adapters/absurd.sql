-- name: schema_version
-- The schema release Absurd recorded when its SQL was applied (`get_schema_version`),
-- checked against the SDK's pin so the column never runs one release on another's SQL.
select absurd.get_schema_version()

-- name: reset
-- Forget every task, run, checkpoint, event and wait of the adapter's queue between
-- examples (Absurd's per-queue tables, `ensure_queue_tables`; the queue row stays).
truncate absurd.t_leasecheck, absurd.r_leasecheck, absurd.c_leasecheck,
    absurd.e_leasecheck, absurd.w_leasecheck
