-- name: install
-- A `tasks` table: the state as checked text, `tries` (the fencing token), `holder` and
-- `lease_expires` for the lease, `visible_at` for the backoff between tries.
create table tasks (
    id            bigserial primary key,
    payload       jsonb not null,
    state         text not null default 'ready'
                  check (state in ('ready', 'active', 'finished', 'dead')),
    tries         int not null default 0,
    max_tries     int not null,
    visible_at    timestamptz not null,
    holder        text,
    lease_expires timestamptz,
    error         text
);
create index tasks_visible on tasks (visible_at, id) where state in ('ready', 'active')

-- name: reset
-- Empty the table between examples, ids from 1 again.
truncate tasks restart identity

-- name: enqueue
-- A task is visible as soon as it is enqueued.
insert into tasks (payload, max_tries, visible_at) values (%(payload)s, %(max_tries)s, now())
returning id

-- name: give_up_expired
-- A task whose last try's lease ran out is dead: no claim takes it again.
update tasks
   set state = 'dead', holder = null, lease_expires = null,
       error = 'lease expired on the last try'
 where state = 'active' and lease_expires < now() and tries >= max_tries

-- name: take
-- Take up to n visible tasks with tries left: ready ones, and active ones whose lease ran out.
with picked as (
    select id from tasks
     where tries < max_tries
       and ((state = 'ready' and visible_at <= now())
            or (state = 'active' and lease_expires < now()))
     order by visible_at, id
     limit %(n)s
       for update skip locked
)
update tasks t
   set state = 'active', tries = t.tries + 1, holder = %(worker)s,
       lease_expires = now() + %(lease)s
  from picked
 where t.id = picked.id
returning t.id, t.tries

-- name: extend
-- Move the lease to a lease from now, while this try holds the task.
update tasks set lease_expires = now() + %(lease)s
 where id = %(id)s and tries = %(tries)s and state = 'active'
returning id

-- name: extend_reviving
-- The bug: fenced on the try but not on the state, it marks the task active "to be safe".
update tasks set state = 'active', lease_expires = now() + %(lease)s
 where id = %(id)s and tries = %(tries)s
returning id

-- name: extend_from_lease_end
-- The bug: the lease grows from where it ended, not from now.
update tasks set lease_expires = lease_expires + %(lease)s
 where id = %(id)s and tries = %(tries)s and state = 'active'
returning id

-- name: finish
-- Mark the task finished for the try that holds it.
update tasks set state = 'finished', holder = null, lease_expires = null
 where id = %(id)s and tries = %(tries)s and state = 'active'
returning id

-- name: finish_many
-- Finish a batch: each task only for the try its own claim names (pairs, in order).
update tasks t set state = 'finished', holder = null, lease_expires = null
  from unnest(%(ids)s::bigint[], %(tries)s::int[]) as batch (id, tries)
 where t.id = batch.id and t.tries = batch.tries and t.state = 'active'
returning t.id, t.tries

-- name: finish_many_any
-- The bug: ids and tries matched each against the whole list, not pairwise.
update tasks set state = 'finished', holder = null, lease_expires = null
 where id = any(%(ids)s::bigint[]) and tries = any(%(tries)s::int[]) and state = 'active'
returning id, tries

-- name: retry
-- Back off and retry, or give the task up on its last try; only the try that holds it.
update tasks
   set state = case when tries >= max_tries then 'dead' else 'ready' end,
       visible_at = now() + tries * interval '1 second',
       holder = null, lease_expires = null, error = %(error)s
 where id = %(id)s and tries = %(tries)s and state = 'active'
returning id

-- name: retry_always
-- The bug: every failure backs off and retries, the last try's too.
update tasks
   set state = 'ready', visible_at = now() + tries * interval '1 second',
       holder = null, lease_expires = null, error = %(error)s
 where id = %(id)s and tries = %(tries)s and state = 'active'
returning id

-- name: status
-- The task's state in the contract's words.
select case state when 'ready' then 'queued' when 'active' then 'running'
                  when 'finished' then 'done' else 'failed' end
  from tasks where id = %(id)s
