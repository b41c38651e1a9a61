// graphile-worker 0.18 clients, each on its own pg pool, answering the harness's calls.
//
// Usage: node graphile_worker_client.mjs NODE_MODULES LOCK_SECONDS
//
// One process hosts the clients of every session of a run, as pgboss_client.mjs does (see
// leasecheck/adapters/node_client.py for the protocol). A client is what a worker pool
// holds: graphile-worker's compiled options (`processSharedOptions`, its preset's
// defaults: prepared statements on, database time) and its `withPgClient` over a pg pool
// of its own. Its calls are the functions the pool's workers call, with the pool's id:
//   {"op": "open", "pg": {...}}                      -> the pool and compiled options
//   {"op": "close"}                                  -> the pool ends
//   {"op": "get", "poolId": p}                       -> batchGetJobs(..., tasks, p, null, 1)
//   {"op": "complete", "poolId": p, "job": j}        -> batchCompleteJobs(..., p, [j])
//   {"op": "fail", "poolId": p, "job": j, "message": m} -> batchFailJobs(..., p, [{ job, message }])
//   {"op": "sweep"}                                  -> resetLockedAt(...)
// `get` answers the jobs (as JSON); `complete` and `fail` the row count of the statement
// that settled the job, read off the library's own client. The sweep's 4-hour lock is
// LOCK_SECONDS (the harness's lease), written into its statement on the way out.
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { serve } from "./host.mjs";

const home = join(resolve(process.argv[2]), "graphile-worker");
const LOCK = `interval '${Number(process.argv[3])} seconds'`;
const url = (p) => pathToFileURL(join(home, p)).href;
const pg = createRequire(join(home, "package.json"))("pg");
const { processSharedOptions, makeEnhancedWithPgClient } = await import(url("dist/lib.js"));
const { makeWithPgClientFromPool } = await import(url("dist/helpers.js"));
const { batchGetJobs } = await import(url("dist/sql/getJobs.js"));
const { batchCompleteJobs } = await import(url("dist/sql/completeJobs.js"));
const { batchFailJobs } = await import(url("dist/sql/failJobs.js"));
const { resetLockedAt } = await import(url("dist/sql/resetLockedAt.js"));

const silent = { debug() {}, info() {}, warn() {}, error() {}, scope() { return silent; } };
const tasks = { leasecheck: async () => {} };
const clients = new Map();

/** The pool's `withPgClient`, noting each statement's row count, the sweep's lock adapted. */
function recording(pool, counts) {
  const base = makeWithPgClientFromPool(pool);
  const seen = (client) => ({
    async query(q, values) {
      const spec = typeof q === "string" ? { text: q, values } : { ...q };
      spec.text = spec.text.replaceAll("interval '4 hours'", LOCK);
      const result = await client.query(spec);
      counts.push(result.rowCount);
      return result;
    },
  });
  return makeEnhancedWithPgClient((fn) => base((client) => fn(seen(client))));
}

function open(c) {
  const pool = new pg.Pool({ ...c.pg, idleTimeoutMillis: 0 });
  pool.on("error", (err) => process.stderr.write(`pg pool error: ${err?.message}\n`));
  const counts = [];
  const options = processSharedOptions({ pgPool: pool, schema: "graphile_worker", logger: silent });
  clients.set(c.client, { pool, counts, options, withPgClient: recording(pool, counts) });
  return null;
}

const calls = {
  get: async (k, c) => await batchGetJobs(k.options, k.withPgClient, tasks, c.poolId, null, 1),
  complete: async (k, c) => {
    await batchCompleteJobs(k.options, k.withPgClient, c.poolId, [c.job]);
    return k.counts.at(-1);
  },
  fail: async (k, c) => {
    await batchFailJobs(k.options, k.withPgClient, c.poolId, [{ job: c.job, message: c.message }]);
    return k.counts.at(-1);
  },
  sweep: async (k) => {
    await resetLockedAt(k.options, k.withPgClient);
    return null;
  },
};

async function answer(c) {
  if (c.op === "open") return open(c);
  const k = clients.get(c.client);
  if (!k) throw new Error(`no graphile-worker client ${c.client}`);
  if (c.op === "close") {
    clients.delete(c.client);
    await k.pool.end().catch(() => {});
    return null;
  }
  k.counts.length = 0;
  return await calls[c.op](k, c);
}

await serve(answer);
