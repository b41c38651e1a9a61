-- name: install
-- Work items with text ids, the shape an ORM model gives: a row is read, checked in
-- Python, then written back by primary key. `run` counts the runs an item was given
-- (the fencing token); the lease is `heartbeat_at` plus the item's `lease_seconds`.
create sequence work_item_numbers;
create table work_items (
    id            text primary key
                  default 'wi_' || lpad(nextval('work_item_numbers')::text, 8, '0'),
    created       bigint generated always as identity,
    payload       jsonb not null,
    status        text not null default 'new'
                  check (status in ('new', 'in_progress', 'finished', 'gave_up')),
    owner         text,
    run           int not null default 0,
    max_runs      int not null,
    heartbeat_at  timestamptz,
    lease_seconds double precision,
    error         text
);
create index work_items_open on work_items (created) where status in ('new', 'in_progress')

-- name: reset
-- Empty the table and restart both counters.
truncate work_items restart identity;
alter sequence work_item_numbers restart

-- name: insert
-- Save a new item.
insert into work_items (payload, max_runs) values (%(payload)s, %(max_runs)s) returning id

-- name: next_item
-- The next new item, or one whose lease ran out, locked for this transaction.
select id, status, run, max_runs from work_items
 where status = 'new'
    or (status = 'in_progress'
        and heartbeat_at + lease_seconds * interval '1 second' < now())
 order by created
 limit 1
   for update skip locked

-- name: get_locked
-- Read one item and lock it until the transaction ends (select_for_update).
select status, owner, run from work_items where id = %(id)s for update

-- name: get
-- Read one item (a plain get(): no lock).
select status, owner, run from work_items where id = %(id)s

-- name: save_started
-- Save the item as started by a worker.
update work_items
   set status = 'in_progress', owner = %(owner)s, run = %(run)s,
       heartbeat_at = now(), lease_seconds = %(lease_seconds)s
 where id = %(id)s

-- name: save_heartbeat
-- Save a fresh heartbeat.
update work_items set heartbeat_at = now(), lease_seconds = %(lease_seconds)s
 where id = %(id)s

-- name: save_status
-- Save a new status (and error) and let the item go.
update work_items
   set status = %(status)s, owner = null, heartbeat_at = null, lease_seconds = null,
       error = coalesce(%(error)s, error)
 where id = %(id)s

-- name: status
-- The item's status in the contract's words.
select case status when 'new' then 'queued' when 'in_progress' then 'running'
                   when 'finished' then 'done' else 'failed' end
  from work_items where id = %(id)s
