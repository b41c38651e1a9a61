-- Session settings the driver's faults make on a worker's connection, around one call.

-- name: arm_lock_timeout
-- time_out: the worker's next lock wait fails with 55P03. Every wait the harness lets
-- last is on a transaction held between steps, which no millisecond ends: it surely
-- times out, and nothing else in a step holds a lock that long.
set lock_timeout = '1ms'

-- name: disarm_lock_timeout
-- time_out: back to the session's default once the call has answered.
reset lock_timeout
