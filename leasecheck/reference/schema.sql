-- The reference queue: one table of jobs claimed with FOR UPDATE SKIP LOCKED and held
-- with leases; the attempt counter is the fencing token.

create table jobs (
    id           bigint generated always as identity primary key,
    payload      jsonb not null,
    status       text not null default 'queued'
                 check (status in ('queued', 'running', 'done', 'failed')),
    attempt      integer not null default 0 check (attempt >= 0),
    max_attempts integer not null default 3 check (max_attempts > 0),
    locked_by    text,
    lease_until  timestamptz,
    claimed_at   timestamptz,
    last_error   text,
    created_at   timestamptz not null default now(),
    finished_at  timestamptz,
    check ((status = 'running') = (lease_until is not null and locked_by is not null))
);

-- The claim reads only queued and running rows; done and failed rows pile up forever,
-- so the index the claim scans leaves them out.
create index jobs_claimable on jobs (id) where status in ('queued', 'running');

-- The story's side effect: one receipt row per send. The idempotency key (derived from
-- the job id) lets a receiver drop duplicates; workers that use none leave it null.
create table receipts (
    id              bigint generated always as identity primary key,
    job_id          bigint not null,
    worker          text not null,
    attempt         integer not null,
    idempotency_key text unique,
    sent_at         timestamptz not null default now()
);
