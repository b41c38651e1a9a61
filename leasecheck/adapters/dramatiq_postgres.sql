-- name: reset
-- Forget every message, worker and result between examples, as a fresh install leaves
-- them (the `position` identity starts again).
truncate dramatiq.queue, dramatiq.worker, dramatiq.result restart identity

-- name: state
-- A message's state as dramatiq-postgres keeps it; no row once acknowledged (ack deletes it).
select "state"::text from dramatiq.queue where message_id = %(id)s
