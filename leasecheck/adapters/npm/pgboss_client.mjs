// pg-boss instances, each on its own pg pool, answering the harness's calls as JSON lines.
//
// Usage: node pgboss_client.mjs NODE_MODULES QUEUE
//
// One process hosts the instances of every session of a run (starting a Node.js process
// per session would cost more than the calls). Each line read is one call, answered by a
// line with the same `id`; calls of different instances may be in flight at once:
//   {"id": i, "client": c, "op": "open", "pg": {...}}  -> new PgBoss(...) on its own pool
//   {"id": i, "client": c, "op": "close"}               -> boss.stop(): its pool ends
//   {"id": i, "client": c, "op": "fetch", "batchSize": n} -> boss.fetch(QUEUE, { batchSize })
//   {"id": i, "client": c, "op": "touch", "jobs": [...]}  -> boss.touch(QUEUE, jobs)
//   {"id": i, "client": c, "op": "complete", "jobs": [...]} -> boss.complete(QUEUE, jobs)
//   {"id": i, "client": c, "op": "fail", "jobs": [...], "data": x} -> boss.fail(QUEUE, jobs, data)
//   {"id": i, "client": c, "op": "supervise"}          -> boss.supervise(QUEUE)
// `jobs` are the fetched jobs as { id, retryCount }, which fence a call to the attempt that
// was fetched (manager.js mapAttemptArg), as work() passes them. An answer is
// {"id": i, "ok": value} (fetch: the jobs; touch, complete, fail: pg-boss's `affected`
// count) or {"id": i, "error": message, "code": code}. An instance starts at its first call.
//
// Its timers run on a clock that never fires (pg-boss's `clock` option): the queue cache,
// the supervisor and the registrar would otherwise send statements between the harness's
// steps. Its pool keeps idle connections (`idleTimeoutMillis: 0`) for the same reason.
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { serve } from "./host.mjs";

const home = join(resolve(process.argv[2]), "pg-boss");
const QUEUE = process.argv[3];
const { PgBoss } = await import(pathToFileURL(join(home, "dist/index.js")).href);

const still = {
  now: () => Date.now(),
  setTimeout: () => ({}),
  clearTimeout: () => {},
  setInterval: () => ({}),
  clearInterval: () => {},
};
const instances = new Map();

function open(c) {
  const boss = new PgBoss({
    ...c.pg,
    schema: "pgboss",
    migrate: false,
    supervise: false,
    schedule: false,
    clock: still,
    idleTimeoutMillis: 0,
  });
  boss.on("error", (err) => process.stderr.write(`pg-boss error: ${err?.message}\n`));
  instances.set(c.client, { boss, started: null });
  return null;
}

async function close(c) {
  const instance = instances.get(c.client);
  instances.delete(c.client);
  if (instance?.started) {
    await instance.started.catch(() => {});
    await instance.boss.stop({ graceful: false, wait: true, close: true }).catch(() => {});
  }
  return null;
}

const calls = {
  fetch: async (boss, c) =>
    ((await boss.fetch(QUEUE, { batchSize: c.batchSize })) ?? []).map((j) => ({
      id: j.id,
      retryCount: j.retryCount,
    })),
  touch: async (boss, c) => (await boss.touch(QUEUE, c.jobs)).affected,
  complete: async (boss, c) => (await boss.complete(QUEUE, c.jobs)).affected,
  fail: async (boss, c) => (await boss.fail(QUEUE, c.jobs, c.data)).affected,
  supervise: async (boss) => {
    await boss.supervise(QUEUE);
    return null;
  },
};

async function answer(c) {
  if (c.op === "open") return open(c);
  if (c.op === "close") return close(c);
  const instance = instances.get(c.client);
  if (!instance) throw new Error(`no pg-boss instance ${c.client}`);
  instance.started ??= instance.boss.start();
  await instance.started;
  return await calls[c.op](instance.boss, c);
}

await serve(answer);
