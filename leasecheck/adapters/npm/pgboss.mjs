// Print pg-boss's own SQL as JSON, built by the installed package's plans.js.
//
// Usage: node pgboss.mjs NODE_MODULES
//
// Nothing here writes SQL: every statement comes from a builder of pg-boss's
// dist/plans.js (or its public getConstructionPlans), called with the arguments its
// own manager.js and boss.js pass (cited beside each). The Python adapter runs them on
// the harness's connection and passes the values the manager would.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const home = join(resolve(process.argv[2]), "pg-boss");
const version = JSON.parse(readFileSync(join(home, "package.json"), "utf8")).version;
const url = (p) => pathToFileURL(join(home, p)).href;
const { getConstructionPlans } = await import(url("dist/index.js"));
const plans = await import(url("dist/plans.js"));

const SCHEMA = "pgboss";
const QUEUE = "leasecheck";
// A queue created without `partition: true` keeps its jobs in the shared table
// (plans.js createQueueFunction: table_name = COMMON_JOB_TABLE).
const TABLE = plans.COMMON_JOB_TABLE;
const QUEUE_OPTIONS = JSON.parse(process.argv[3] ?? "{}");

const out = {
  version,
  schema: SCHEMA,
  queue: QUEUE,
  table: TABLE,
  // index.js getConstructionPlans: the schema, as Contractor.create() installs it.
  install: getConstructionPlans(SCHEMA),
  // manager.js createQueue: plans.createQueue(schema, name, { ...options, policy }, noAdvisoryLocks).
  create_queue: plans.createQueue(SCHEMA, QUEUE, { ...QUEUE_OPTIONS, policy: "standard" }, false),
  // manager.js #createJob: plans.insertJobs(schema, { table, name, returnId: true, notify }), $1 = [job].
  send: plans.insertJobs(SCHEMA, { table: TABLE, name: QUEUE, returnId: true, notify: false }),
  // manager.js #fetch: plans.fetchNextJob({ ...options, schema, table, name, policy, limit: 1 }).
  fetch: plans.fetchNextJob({ schema: SCHEMA, table: TABLE, name: QUEUE, policy: "standard",
    limit: 1, includeTraceContext: false }, false),
  // manager.js complete/fail/touch with the fetched jobs ({ id, retryCount }): fenced.
  complete: plans.completeJobs(SCHEMA, TABLE, undefined, true),
  fail: plans.failJobsById(SCHEMA, TABLE, true),
  touch: plans.touchJobs(SCHEMA, TABLE, true),
  // boss.js #supervisePass: the expiry sweeps, advisory-locked, one batch each.
  expire_by_timeout: plans.failJobsByTimeout(SCHEMA, TABLE, [QUEUE], false, plans.EXPIRY_BATCH_SIZE),
  expire_by_heartbeat: plans.failJobsByHeartbeat(SCHEMA, TABLE, [QUEUE], false, plans.EXPIRY_BATCH_SIZE),
  // plans.js createClockFunction: the hook pg-boss's own TestClock uses to replace job_now().
  clock_function: plans.createClockFunction(SCHEMA, { replace: true, body: "SELECT now();" }),
  clock_body: plans.CLOCK_FUNCTION_BODY,
};
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
