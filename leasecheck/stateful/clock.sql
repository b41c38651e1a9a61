-- name: install
-- The harness schema: simulated time, and the ground truth of in-transaction effects.
-- The simulated instant is kept twice: as sequences (read without a snapshot, so
-- `clock_timestamp()` sees the latest move under any isolation level) and as one row
-- per move, stamped with the server's real instant of the move, so `now()` and
-- `statement_timestamp()` can answer the simulated instant in force when their
-- transaction or statement started, as PostgreSQL's own do.
create schema leasecheck;
create table leasecheck.clock_moves (
    since timestamptz primary key,
    at    timestamptz not null
);
insert into leasecheck.clock_moves (since, at) values ('-infinity', '2030-01-01 00:00:00+00');
create sequence leasecheck.clock_at minvalue 0 start 0;
create sequence leasecheck.clock_since minvalue 0 start 0;
create sequence leasecheck.clock_reads;
create table leasecheck.effects (
    call_id bigint primary key,
    job     text not null,
    token   text not null,
    worker  text not null
);

-- name: clock_functions
-- PostgreSQL's clock, on simulated time (which stands still between moves, so a lease
-- boundary is exact and every run of one seed compares the same instants):
-- now() and transaction_timestamp() the instant in force when the transaction began
-- (stable through savepoints and transactions held across steps), statement_timestamp()
-- the one in force when the statement began, clock_timestamp() and timeofday() the
-- latest. A statement that began before the latest move (one that waited on a lock)
-- reads its instant from the moves' rows, which a REPEATABLE READ snapshot taken
-- before a later move does not show: then it answers the move before it.
create or replace function leasecheck.now() returns timestamptz
    language sql stable parallel restricted as $$
    select at from leasecheck.clock_moves where since <= pg_catalog.now()
    order by since desc limit 1 $$;
create or replace function leasecheck.transaction_timestamp() returns timestamptz
    language sql stable parallel restricted as 'select leasecheck.now()';
create or replace function leasecheck.clock_timestamp() returns timestamptz
    language sql volatile parallel restricted as $$
    select '2030-01-01 00:00:00+00'::timestamptz + last_value * interval '1 microsecond'
    from leasecheck.clock_at $$;
create or replace function leasecheck.statement_timestamp() returns timestamptz
    language sql stable parallel restricted as $$
    select case
        when pg_catalog.statement_timestamp() >= 'epoch'::timestamptz
            + (select last_value from leasecheck.clock_since) * interval '1 microsecond'
        then leasecheck.clock_timestamp()
        else (select at from leasecheck.clock_moves
              where since <= pg_catalog.statement_timestamp()
              order by since desc limit 1)
    end $$;
create or replace function leasecheck.timeofday() returns text
    language sql volatile parallel restricted as $$
    select to_char(leasecheck.clock_timestamp(), 'Dy Mon DD HH24:MI:SS.US YYYY TZ') $$

-- name: counting_clock_functions
-- The same clock, counting its reads (the clock probe asks which calls read it).
create or replace function leasecheck.now() returns timestamptz
    language sql volatile as $$
    select nextval('leasecheck.clock_reads');
    select at from leasecheck.clock_moves where since <= pg_catalog.now()
    order by since desc limit 1 $$;
create or replace function leasecheck.transaction_timestamp() returns timestamptz
    language sql volatile as 'select leasecheck.now()';
create or replace function leasecheck.clock_timestamp() returns timestamptz
    language sql volatile as $$
    select nextval('leasecheck.clock_reads');
    select '2030-01-01 00:00:00+00'::timestamptz + last_value * interval '1 microsecond'
    from leasecheck.clock_at $$;
create or replace function leasecheck.statement_timestamp() returns timestamptz
    language sql volatile as $$
    select nextval('leasecheck.clock_reads');
    select case
        when pg_catalog.statement_timestamp() >= 'epoch'::timestamptz
            + (select last_value from leasecheck.clock_since) * interval '1 microsecond'
        then '2030-01-01 00:00:00+00'::timestamptz
            + (select last_value from leasecheck.clock_at) * interval '1 microsecond'
        else (select at from leasecheck.clock_moves
              where since <= pg_catalog.statement_timestamp()
              order by since desc limit 1)
    end $$

-- name: clock_reads
-- How often the counting clock was read so far.
select last_value + (case when is_called then 1 else 0 end) from leasecheck.clock_reads

-- name: advance
-- Move simulated time forward by %(delta)s microseconds, stamped with the server's real
-- instant: transactions and statements that begin from now on see the new instant.
with moved as (
    select (select last_value from leasecheck.clock_at) + %(delta)s::bigint as us,
           pg_catalog.clock_timestamp() as since
), kept as (
    insert into leasecheck.clock_moves (since, at)
    select since, '2030-01-01 00:00:00+00'::timestamptz + us * interval '1 microsecond'
    from moved
)
select setval('leasecheck.clock_at', us),
       setval('leasecheck.clock_since', (extract(epoch from since) * 1000000)::bigint)
from moved

-- name: reset
-- Back to the epoch, with no effects recorded.
delete from leasecheck.clock_moves where since > '-infinity';
select setval('leasecheck.clock_at', 0), setval('leasecheck.clock_since', 0);
delete from leasecheck.effects

-- name: record_effect
-- The harness's in-transaction effect: one row per accepted completion call.
insert into leasecheck.effects (call_id, job, token, worker)
values (%(call_id)s, %(job)s, %(token)s, %(worker)s)

-- name: effects
-- Every effect row, for the invariants.
select call_id, job, token, worker from leasecheck.effects order by call_id

-- name: clean_session
-- Clear what a queue left on a session: DISCARD ALL but DEALLOCATE ALL (see actors.clean).
close all;
set session authorization default;
reset all;
unlisten *;
select pg_advisory_unlock_all();
discard temp;
discard sequences
