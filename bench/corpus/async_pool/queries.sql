-- name: install
-- Background tasks with a status enum; a reaper (the queue's `maintain`) sends expired
-- tasks back to `waiting`, or fails them on their last attempt.
create type task_state as enum ('waiting', 'active', 'done', 'failed');
create table background_tasks (
    id               bigint generated always as identity primary key,
    payload          jsonb not null,
    state            task_state not null default 'waiting',
    attempt          int not null default 0,
    max_attempts     int not null,
    worker_id        text,
    lease_expires_at timestamptz,
    last_error       text
);
create index background_tasks_waiting on background_tasks (id) where state = 'waiting'

-- name: reset
-- Empty the table between examples.
truncate background_tasks restart identity

-- name: push
-- Add a task.
insert into background_tasks (payload, max_attempts) values (%(payload)s, %(max_attempts)s)
returning id

-- name: pop
-- Take the oldest waiting task.
update background_tasks
   set state = 'active', attempt = attempt + 1, worker_id = %(worker)s,
       lease_expires_at = now() + %(lease)s
 where id = (select id from background_tasks where state = 'waiting'
              order by id limit 1 for update skip locked)
returning id, attempt

-- name: touch
-- Extend the lease of the active attempt.
update background_tasks set lease_expires_at = now() + %(lease)s
 where id = %(id)s and attempt = %(attempt)s and state = 'active'

-- name: touch_unfenced
-- The bug: extend the lease of whatever attempt holds the task.
update background_tasks set lease_expires_at = now() + %(lease)s
 where id = %(id)s and state = 'active'

-- name: finish
-- Mark the active attempt done.
update background_tasks set state = 'done', worker_id = null, lease_expires_at = null
 where id = %(id)s and attempt = %(attempt)s and state = 'active'
returning id

-- name: retry
-- Send the active attempt's task back, or fail it on its last attempt.
update background_tasks
   set state = case when attempt >= max_attempts then 'failed' else 'waiting' end::task_state,
       worker_id = null, lease_expires_at = null, last_error = %(error)s
 where id = %(id)s and attempt = %(attempt)s and state = 'active'

-- name: retry_unfenced
-- The bug: any attempt sends the task back (or fails it).
update background_tasks
   set state = case when attempt >= max_attempts then 'failed' else 'waiting' end::task_state,
       worker_id = null, lease_expires_at = null, last_error = %(error)s
 where id = %(id)s and state = 'active'

-- name: reap
-- Expired tasks go back to waiting, or fail on their last attempt.
update background_tasks
   set state = case when attempt >= max_attempts then 'failed' else 'waiting' end::task_state,
       worker_id = null, lease_expires_at = null, last_error = 'lease expired'
 where state = 'active' and lease_expires_at < now()

-- name: reap_uncapped
-- The bug: expired tasks always go back to waiting, whatever their attempt.
update background_tasks
   set state = 'waiting', worker_id = null, lease_expires_at = null, last_error = 'lease expired'
 where state = 'active' and lease_expires_at < now()

-- name: state
-- The task's state in the contract's words.
select case state when 'waiting' then 'queued' when 'active' then 'running'
                  else state::text end
  from background_tasks where id = %(id)s
