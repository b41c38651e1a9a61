-- name: install
-- Tasks with UUID ids and a fresh UUID lease id per lease (the fencing token); `seq`
-- keeps the order tasks were added in. Leasing is a plpgsql function, as many
-- hand-written queues ship it, with a variant that forgets the cap on expired leases.
create table tasks (
    id            uuid primary key default gen_random_uuid(),
    seq           bigint generated always as identity unique,
    kind          text not null,
    body          jsonb not null,
    state         text not null default 'ready'
                  check (state in ('ready', 'leased', 'completed', 'abandoned')),
    lease_id      uuid,
    leased_by     text,
    lease_expires timestamptz,
    tries         int not null default 0,
    max_tries     int not null,
    error         text
);
create index tasks_open on tasks (seq) where state in ('ready', 'leased');

create function lease_task(p_worker text, p_lease interval, p_capped boolean)
returns table (o_id uuid, o_lease uuid) language plpgsql as $$
declare
    t tasks%rowtype;
begin
    loop
        select * into t from tasks
         where state = 'ready' or (state = 'leased' and lease_expires < now())
         order by seq
         limit 1
           for update skip locked;
        if not found then
            return;
        end if;
        if p_capped and t.state = 'leased' and t.tries >= t.max_tries then
            update tasks
               set state = 'abandoned', lease_id = null, leased_by = null,
                   lease_expires = null, error = 'lease expired on the last try'
             where id = t.id;
            continue;
        end if;
        o_id := t.id;
        o_lease := gen_random_uuid();
        update tasks
           set state = 'leased', tries = tries + 1, lease_id = o_lease,
               leased_by = p_worker, lease_expires = now() + p_lease
         where id = t.id;
        return next;
        return;
    end loop;
end
$$

-- name: reset
-- Empty the table between examples.
truncate tasks restart identity

-- name: enqueue
-- Add a task.
insert into tasks (kind, body, max_tries) values (%(kind)s, %(body)s, %(max_tries)s)
returning id::text

-- name: lease
-- Lease the oldest free task (or an expired one) to a worker.
select o_id::text, o_lease::text from lease_task(%(worker)s, %(lease)s, %(capped)s)

-- name: extend
-- Extend the lease, only under the lease id it was granted with.
update tasks set lease_expires = now() + %(lease)s
 where id = %(id)s and lease_id = %(lease_id)s

-- name: complete
-- Complete the task under its lease id.
update tasks set state = 'completed', lease_id = null, leased_by = null, lease_expires = null
 where id = %(id)s and lease_id = %(lease_id)s

-- name: complete_unfenced
-- The bug: any holder of the task id completes a leased task.
update tasks set state = 'completed', lease_id = null, leased_by = null, lease_expires = null
 where id = %(id)s and state = 'leased'

-- name: complete_by_worker
-- The bug: the completion is fenced on the worker's name, not on the lease id.
update tasks set state = 'completed', lease_id = null, leased_by = null, lease_expires = null
 where id = %(id)s and leased_by = %(worker)s and state = 'leased'

-- name: release
-- Give the task back for another try, or abandon it after its last one.
update tasks
   set state = case when tries >= max_tries then 'abandoned' else 'ready' end,
       lease_id = null, leased_by = null, lease_expires = null, error = %(error)s
 where id = %(id)s and lease_id = %(lease_id)s

-- name: state
-- The task's state in the contract's words.
select case state when 'ready' then 'queued' when 'leased' then 'running'
                  when 'completed' then 'done' else 'failed' end
  from tasks where id = %(id)s
