-- name: install
-- The harness schema: simulated time, and the ground truth of in-transaction effects.
create schema leasecheck;
create table leasecheck.clock (
    one boolean primary key default true check (one),
    at  timestamptz not null
);
insert into leasecheck.clock (at) values ('2030-01-01 00:00:00+00');
-- Simulated time stands still between advances, so a lease boundary is exact and
-- every run of one seed compares the same instants.
create function leasecheck.now() returns timestamptz
    language sql stable parallel safe as 'select at from leasecheck.clock';
create function leasecheck.transaction_timestamp() returns timestamptz
    language sql stable parallel safe as 'select at from leasecheck.clock';
create function leasecheck.statement_timestamp() returns timestamptz
    language sql stable parallel safe as 'select at from leasecheck.clock';
create function leasecheck.clock_timestamp() returns timestamptz
    language sql volatile parallel safe as 'select at from leasecheck.clock';
create table leasecheck.effects (
    call_id bigint primary key,
    job     text not null,
    token   text not null,
    worker  text not null
);

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
