-- name: install
-- Work items and their leases in two tables: `work_items` says what a job is and where
-- it stands, `leases` (one row per item, from its enqueue on) who holds it, under which
-- attempt (the fencing token) and until when; `queue_counters` counts claims.
create table work_items (
    id           bigserial primary key,
    body         jsonb not null,
    status       text not null default 'new'
                 check (status in ('new', 'taken', 'completed', 'abandoned')),
    attempts     int not null default 0,
    max_attempts int not null,
    not_before   timestamptz not null,
    last_error   text
);
create index work_items_due on work_items (not_before, id) where status in ('new', 'taken');
create table leases (
    item_id    bigint primary key references work_items (id),
    attempt    int not null default 0,
    owner      text,
    expires_at timestamptz
);
create table queue_counters (
    queue         text primary key,
    claimed       bigint not null default 0,
    last_claim_at timestamptz
);
insert into queue_counters (queue) values ('default')

-- name: reset
-- Empty both tables between examples, ids from 1 again, and zero the counters.
truncate leases, work_items restart identity;
update queue_counters set claimed = 0, last_claim_at = null

-- name: enqueue
-- An item is due as soon as it is enqueued; its lease row starts empty.
with item as (
    insert into work_items (body, max_attempts, not_before)
    values (%(body)s, %(max_attempts)s, now())
    returning id
)
insert into leases (item_id) select id from item
returning item_id

-- name: give_up
-- Items whose last attempt's lease ran out are abandoned and their lease let go; both
-- rows locked, so an owner renewing it in flight is skipped, not overruled.
with gone as (
    select w.id from work_items w join leases l on l.item_id = w.id
     where w.status = 'taken' and l.expires_at < now() and w.attempts >= w.max_attempts
       for update of w, l skip locked
), abandoned as (
    update work_items w set status = 'abandoned', last_error = 'lease expired on the last attempt'
      from gone where w.id = gone.id
    returning w.id
)
update leases l set owner = null, expires_at = null
  from abandoned where l.item_id = abandoned.id

-- name: pick
-- The next due item, or a taken one whose lease ran out with attempts left; the item and
-- its lease row both locked, so nobody renews the lease between this read and the grant.
select w.id from work_items w join leases l on l.item_id = w.id
 where (w.status = 'new' and w.not_before <= now())
    or (w.status = 'taken' and l.expires_at < now() and w.attempts < w.max_attempts)
 order by w.not_before, w.id
 limit 1
   for update of w, l skip locked

-- name: pick_item_only
-- The bug: only the item row is locked; the lease read as expired may be renewed meanwhile.
select w.id from work_items w join leases l on l.item_id = w.id
 where (w.status = 'new' and w.not_before <= now())
    or (w.status = 'taken' and l.expires_at < now() and w.attempts < w.max_attempts)
 order by w.not_before, w.id
 limit 1
   for update of w skip locked

-- name: take
-- The picked item is taken for one more attempt.
update work_items set status = 'taken', attempts = attempts + 1 where id = %(id)s
returning attempts

-- name: grant
-- The lease row names the new attempt, its owner and its end.
update leases set attempt = %(attempt)s, owner = %(worker)s, expires_at = now() + %(lease)s
 where item_id = %(id)s

-- name: count_claim
-- The queue's claim counter, for the dashboard.
update queue_counters set claimed = claimed + 1, last_claim_at = now() where queue = 'default'

-- name: renew
-- Move the lease to a lease from now, while this attempt holds it.
update leases set expires_at = now() + %(lease)s
 where item_id = %(id)s and attempt = %(attempt)s and owner is not null
returning item_id

-- name: release
-- Let the lease go, for the attempt that holds it: what decides a completion or failure.
update leases set owner = null, expires_at = null
 where item_id = %(id)s and attempt = %(attempt)s and owner is not null
returning item_id

-- name: mark_completed
-- The released item is completed.
update work_items set status = 'completed' where id = %(id)s

-- name: mark_failed
-- The released item backs off and is due again, or is abandoned on its last attempt.
update work_items
   set status = case when attempts >= max_attempts then 'abandoned' else 'new' end,
       not_before = now() + attempts * interval '2 seconds', last_error = %(error)s
 where id = %(id)s

-- name: status
-- The item's status in the contract's words.
select case status when 'new' then 'queued' when 'taken' then 'running'
                   when 'completed' then 'done' else 'failed' end
  from work_items where id = %(id)s
