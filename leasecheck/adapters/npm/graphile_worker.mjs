// Print graphile-worker's own SQL as JSON, produced by the installed package's code.
//
// Usage: node graphile_worker.mjs NODE_MODULES
//
// Nothing here writes SQL: every statement is what the package's own migrate() and
// worker code send to PostgreSQL, captured by a recording client that answers just
// enough for that code to go on (a missing migrations table, a server version, one
// job row). The Python adapter runs the statements on the harness's connection.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const modules = resolve(process.argv[2]);
const home = join(modules, "graphile-worker");
const version = JSON.parse(readFileSync(join(home, "package.json"), "utf8")).version;
const SCHEMA = "graphile_worker";
const silent = { debug() {}, info() {}, warn() {}, error() {}, scope() { return silent; } };
const JOB = { id: "1", job_queue_id: null, queue_name: null, task_id: 1, task_identifier: "leasecheck",
  payload: {}, attempts: 1, max_attempts: 3, locked_by: "x", locked_at: new Date() };

/** A pg client that records each query and answers with `answer(text)`. */
function recorder(answer) {
  const seen = [];
  const client = {
    async query(q, values) {
      const text = typeof q === "string" ? q : q.text;
      const vals = typeof q === "string" ? values : q.values;
      const entry = { text, values: vals ?? [] };
      seen.push(entry);
      try {
        return answer(text);
      } catch (e) {
        entry.threw = true;
        throw e;
      }
    },
  };
  const withPgClient = async (fn) => fn(client);
  withPgClient.withRetries = withPgClient;
  return { seen, client, withPgClient };
}

const missing = () => Object.assign(new Error("relation does not exist"), { code: "42P01" });

function migrationAnswer(text) {
  if (/from \S+\.migrations order by id desc/.test(text)) throw missing();
  if (text.includes("server_version_num")) return { rows: [{ server_version_num: "180000" }] };
  return { rows: [] };
}

async function v013() {
  const require = createRequire(join(home, "package.json"));
  const { migrate } = require(join(home, "dist/migrate.js"));
  const { makeNewWorker } = require(join(home, "dist/worker.js"));
  const install = recorder(migrationAnswer);
  await migrate({ schema: SCHEMA, logger: silent }, install.client);

  async function run(task) {
    let given = false;
    const r = recorder((text) => {
      if (text.includes(".get_job(") && !given) { given = true; return { rows: [{ ...JOB }] }; }
      return { rows: [] };
    });
    const w = makeNewWorker({ schema: SCHEMA, logger: silent, workerId: "worker-recorded" },
      { leasecheck: task }, r.withPgClient, false);
    await w.promise.catch(() => {});
    return r.seen;
  }
  const ok = await run(async () => {});
  const failed = await run(async () => { throw new Error("boom"); });
  return {
    install: install.seen,
    get_job: ok.find((q) => q.text.includes(".get_job(")),
    complete_job: ok.find((q) => q.text.includes(".complete_job(")),
    fail_job: failed.find((q) => q.text.includes(".fail_job(")),
  };
}

async function v018() {
  const url = (p) => pathToFileURL(join(home, p)).href;
  const { migrate } = await import(url("dist/migrate.js"));
  const { batchGetJobs } = await import(url("dist/sql/getJobs.js"));
  const { batchCompleteJobs } = await import(url("dist/sql/completeJobs.js"));
  const { batchFailJobs } = await import(url("dist/sql/failJobs.js"));
  const { resetLockedAt } = await import(url("dist/sql/resetLockedAt.js"));
  // The compiled options the package's own code reads (its preset defaults:
  // prepared statements on, database time, no hooks).
  const options = {
    workerSchema: SCHEMA, escapedWorkerSchema: `"${SCHEMA}"`, logger: silent,
    resolvedPreset: { worker: { preparedStatements: true, useNodeTime: false } },
    hooks: { async process() {} },
    middleware: { run: (_name, event, fn) => fn(event) },
  };
  const install = recorder(migrationAnswer);
  await migrate(options, install.client);
  const claim = recorder((text) =>
    text.includes("select id, identifier") ? { rows: [{ id: 1, identifier: "leasecheck" }] } : { rows: [] });
  await batchGetJobs(options, claim.withPgClient, { leasecheck: async () => {} }, "pool-recorded", null, 1);
  const done = recorder(() => ({ rows: [] }));
  await batchCompleteJobs(options, done.withPgClient, "pool-recorded", [{ ...JOB }]);
  const failed = recorder(() => ({ rows: [] }));
  await batchFailJobs(options, failed.withPgClient, "pool-recorded", [{ job: { ...JOB }, message: "boom" }]);
  const sweep = recorder(() => ({ rows: [] }));
  await resetLockedAt(options, sweep.withPgClient);
  return {
    install: install.seen,
    tasks: claim.seen.slice(0, 2),
    get_job: claim.seen[2],
    complete_job: done.seen[0],
    fail_job: failed.seen[0],
    reset_locked_at: sweep.seen[0],
  };
}

const out = version.startsWith("0.13.") ? await v013() : await v018();
process.stdout.write(JSON.stringify({ version, ...out }, null, 1) + "\n");
