-- Session settings the driver's faults make on a worker's connection, around one call.

-- name: arm_lock_timeout
-- time_out: the worker's next lock wait fails with 55P03. Every wait the harness lets
-- last is on a transaction held between steps, which no millisecond ends: it surely
-- times out, and nothing else in a step holds a lock that long.
set lock_timeout = '1ms'

-- name: disarm_lock_timeout
-- time_out: back to the session's default once the call has answered.
reset lock_timeout

-- name: begin_read_committed
-- A held transaction at the level every session starts at.
begin isolation level read committed

-- name: begin_repeatable_read
-- A held transaction on one snapshot: a row changed since it was taken cannot be
-- updated or locked (40001, could not serialize access due to concurrent update).
begin isolation level repeatable read

-- name: take_snapshot
-- open_transaction above READ COMMITTED: the application's transaction reads before it
-- calls the queue, so its snapshot (taken at its first query) predates that call.
select 1

-- name: begin_serializable
-- A held transaction that PostgreSQL also aborts (40001) on a read/write dependency
-- cycle with the transactions it overlapped.
begin isolation level serializable
