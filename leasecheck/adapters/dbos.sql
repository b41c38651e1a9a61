-- name: install_conductor
-- What stands in for DBOS Conductor's view of its executors: when each last pinged, and
-- until when that ping keeps it alive (the lease the machine gave the call).
create table if not exists leasecheck_dbos_conductor (
    executor_id text primary key,
    alive_until timestamptz not null
)

-- name: ping
-- An executor's ping, as Conductor hears it over the executor's websocket.
insert into leasecheck_dbos_conductor (executor_id, alive_until)
values (:executor, now() + make_interval(secs => :seconds))
on conflict (executor_id) do update set alive_until = excluded.alive_until

-- name: silent
-- The executors Conductor declares dead: none of their pings reaches now.
select executor_id from leasecheck_dbos_conductor where alive_until < now() order by executor_id

-- name: reset
-- Forget every workflow, step and ping between examples, as a fresh launch leaves them
-- (the application version a launch registers and the migrations stay).
truncate dbos.workflow_status, dbos.operation_outputs, dbos.notifications,
    dbos.workflow_events, dbos.workflow_events_history, dbos.streams,
    dbos.workflow_input, dbos.workflow_output, leasecheck_dbos_conductor cascade

-- name: state
-- A workflow's status as DBOS keeps it.
select status from dbos.workflow_status where workflow_uuid = %(id)s
