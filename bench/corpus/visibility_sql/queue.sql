-- Messages with a visibility timeout, in the style of SQS: receiving a message hides it
-- until `visible_at` and bumps `receive_count`, which is also the receipt a holder must
-- show to extend, delete or release it (the fencing token). A message whose receipt ran
-- out is visible again; one already received `max_receives` times goes to the
-- dead-letter status on the next receive instead. A late holder (nobody received the
-- message since) keeps its receipt, as in SQS.
-- leasecheck: name=visibility max_attempts=3 ordered_tokens=true heartbeats=true
-- leasecheck: held_transactions=true

-- name: install
-- The messages table; `status` says where a message is, `visible_at` when it may be received.
create table messages (
    msg_id        bigint generated always as identity primary key,
    body          jsonb not null,
    status        text not null default 'available'
                  check (status in ('available', 'inflight', 'deleted', 'dead_letter')),
    visible_at    timestamptz not null,
    receive_count int not null default 0,
    max_receives  int not null,
    receiver      text
);
create index messages_receivable on messages (visible_at, msg_id)
 where status in ('available', 'inflight')

-- name: reset
-- Empty the queue between examples.
truncate messages restart identity

-- name: enqueue
-- Send a message; it is visible at once.
insert into messages (body, visible_at, max_receives)
values (%(payload)s, now(), %(max_attempts)s)
returning msg_id

-- name: claim
-- Dead-letter the messages whose last receive ran out, then receive the next visible one.
-- leasecheck: accepted=rows
update messages
   set status = 'dead_letter', receiver = null
 where status = 'inflight' and visible_at <= now() and receive_count >= max_receives;
update messages
   set status = 'inflight', receive_count = receive_count + 1, receiver = %(worker)s,
       visible_at = now() + %(lease)s
 where msg_id = (select msg_id from messages
                  where status in ('available', 'inflight') and visible_at <= now()
                    and receive_count < max_receives
                  order by visible_at, msg_id
                  limit 1
                    for update skip locked)
returning msg_id, receive_count

-- name: heartbeat
-- Change the visibility timeout, only with the current receipt.
-- leasecheck: accepted=rowcount
update messages set visible_at = now() + %(lease)s
 where msg_id = %(id)s and receive_count = %(token)s and status = 'inflight'

-- name: complete
-- Delete the message, only with the current receipt.
-- leasecheck: accepted=first_column_true
with deleted as (
    update messages set status = 'deleted', receiver = null
     where msg_id = %(id)s and receive_count = %(token)s and status = 'inflight'
    returning msg_id
)
select exists (select from deleted)

-- name: fail
-- Make the message visible again at once, or dead-letter it on its last receive.
-- leasecheck: accepted=rows
update messages
   set status = case when receive_count >= max_receives then 'dead_letter' else 'available' end,
       visible_at = now(), receiver = null
 where msg_id = %(id)s and receive_count = %(token)s and status = 'inflight'
returning msg_id

-- name: state
-- Where the message is, in the contract's words.
select case status when 'available' then 'queued' when 'inflight' then 'running'
                   when 'deleted' then 'done' else 'failed' end
  from messages where msg_id = %(id)s

-- name: effect_key
-- The message's deduplication id: its msg_id, never the receive count.
select 'msg-' || %(id)s::text
