-- name: table
-- Where pg-boss keeps the queue's jobs (the shared table, for a queue without partition).
select table_name from pgboss.queue where name = %(queue)s

-- name: fresh
-- The queue's row and pg-boss's version row as the install leaves them, kept for `reset`:
-- the supervisor stamps both (`monitor_claim_on`, `maintain_on`, `cron_on`, ...) and gates
-- its next pass on the stamps, which would outlive an example whose clock ran ahead.
create table leasecheck_pgboss_fresh as
select to_jsonb(q) as queue, to_jsonb(v) as version
from pgboss.queue q, pgboss.version v
where q.name = %(queue)s

-- name: reset
-- Back to the install between examples: no job, no instance, warning or statistics, and the
-- queue's and version's rows as `fresh` kept them.
delete from pgboss.job where name = (select queue->>'name' from leasecheck_pgboss_fresh);
truncate pgboss.warning, pgboss.queue_stats, pgboss.instance, pgboss.job_dependency;
delete from pgboss.queue where name = (select queue->>'name' from leasecheck_pgboss_fresh);
insert into pgboss.queue
select * from jsonb_populate_record(null::pgboss.queue, (select queue from leasecheck_pgboss_fresh));
delete from pgboss.version;
insert into pgboss.version
select * from jsonb_populate_record(null::pgboss.version, (select version from leasecheck_pgboss_fresh))

-- name: state
-- The job's state as pg-boss records it.
select state::text from pgboss.job where id = %(id)s::uuid
