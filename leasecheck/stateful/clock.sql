-- name: install
-- The harness schema: simulated time, and the ground truth of in-transaction effects.
create schema leasecheck;
create table leasecheck.clock (
    one boolean primary key default true check (one),
    at  timestamptz not null
);
insert into leasecheck.clock (at) values ('2030-01-01 00:00:00+00');
create sequence leasecheck.clock_reads;
create table leasecheck.effects (
    call_id bigint primary key,
    job     text not null,
    token   text not null,
    worker  text not null
);

-- name: clock_functions
-- Simulated time stands still between advances, so a lease boundary is exact and
-- every run of one seed compares the same instants.
create or replace function leasecheck.now() returns timestamptz
    language sql stable parallel safe as 'select at from leasecheck.clock';
create or replace function leasecheck.transaction_timestamp() returns timestamptz
    language sql stable parallel safe as 'select at from leasecheck.clock';
create or replace function leasecheck.statement_timestamp() returns timestamptz
    language sql stable parallel safe as 'select at from leasecheck.clock';
create or replace function leasecheck.clock_timestamp() returns timestamptz
    language sql volatile parallel safe as 'select at from leasecheck.clock'

-- name: counting_clock_functions
-- The same clock, counting its reads (the clock probe asks which calls read it).
create or replace function leasecheck.now() returns timestamptz language sql volatile as
    'select nextval(''leasecheck.clock_reads''); select at from leasecheck.clock';
create or replace function leasecheck.transaction_timestamp() returns timestamptz
    language sql volatile as
    'select nextval(''leasecheck.clock_reads''); select at from leasecheck.clock';
create or replace function leasecheck.statement_timestamp() returns timestamptz
    language sql volatile as
    'select nextval(''leasecheck.clock_reads''); select at from leasecheck.clock';
create or replace function leasecheck.clock_timestamp() returns timestamptz
    language sql volatile as
    'select nextval(''leasecheck.clock_reads''); select at from leasecheck.clock'

-- name: clock_reads
-- How often the counting clock was read so far.
select last_value + (case when is_called then 1 else 0 end) from leasecheck.clock_reads

-- name: advance
-- Move simulated time forward.
update leasecheck.clock set at = at + %(delta)s

-- name: reset
-- Back to the epoch, with no effects recorded.
update leasecheck.clock set at = '2030-01-01 00:00:00+00';
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
