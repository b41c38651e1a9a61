-- name: install_audit
-- Record every committed completion (a job updated to done, whoever asked), independent of the receipts the workers write.
create table soak_completions (
    job_id  bigint not null,
    attempt integer not null,
    at      timestamptz not null default clock_timestamp()
);
create function soak_record_completion() returns trigger language plpgsql as $$
begin
    insert into soak_completions (job_id, attempt) values (new.id, new.attempt);
    return null;
end
$$;
create trigger soak_completions after update on jobs
    for each row when (new.status = 'done') execute function soak_record_completion()

-- name: pending
-- Count the jobs still to be worked on: queued, or running (claimable once the lease ends).
select count(*) from jobs where status in ('queued', 'running')

-- name: cut_worker
-- End every backend of one worker process, found by the application_name the soak gave it.
select count(*) filter (where pg_terminate_backend(pid))
  from pg_stat_activity
 where application_name = %(application_name)s and datname = current_database()

-- name: tally
-- Count the jobs in each status, and the highest attempt any job reached.
select status, count(*), max(attempt) from jobs group by status

-- name: duplicate_completions
-- Jobs whose completion committed more than once, and how many extra completions they had.
select count(*), coalesce(sum(n - 1), 0)
  from (select count(*) as n from soak_completions group by job_id having count(*) > 1) d

-- name: duplicate_receipts
-- Jobs the receiver accepted more than one receipt for, and how many extra receipts it accepted.
select count(*), coalesce(sum(n - 1), 0)
  from (select count(*) as n from receipts group by job_id having count(*) > 1) d

-- name: done_without_receipt
-- Count jobs marked done whose receipt is missing (the effect must commit with the completion).
select count(*) from jobs j
 where j.status = 'done' and not exists (select 1 from receipts r where r.job_id = j.id)

-- name: duplicate_receipts_from
-- Count the jobs with more than one receipt where one came from a worker whose name starts with the prefix.
select count(*) from (
    select job_id from receipts group by job_id
    having count(*) > 1 and bool_or(starts_with(worker, %(prefix)s))
) d
