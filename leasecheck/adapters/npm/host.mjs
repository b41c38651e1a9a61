// The line protocol of the Node.js hosts (leasecheck/adapters/node_client.py): each line
// read is one call, {"id": i, "client": c, "op": ..., ...}; each answer is one line with
// the same id, {"id": i, "ok": value} or {"id": i, "error": message, "code": code}. Calls
// are answered as they finish, so those of different clients may be in flight at once.
import { createInterface } from "node:readline";

const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");

// The harness ends a crashed session's connections under its calls: node-postgres then
// emits "error" on the client a call has checked out, which, unheard, would end the
// process that hosts every session's client (and read as the queue's error in each).
// The call in flight fails by itself (its query rejects), so the error is noted only.
process.on("uncaughtException", (err) => process.stderr.write(`uncaught: ${err?.message}\n`));
process.on("unhandledRejection", (err) => process.stderr.write(`unhandled: ${err?.message}\n`));

/** Answer every call read from stdin with `answer(call)`, until stdin closes. */
export async function serve(answer) {
  for await (const line of createInterface({ input: process.stdin })) {
    const c = JSON.parse(line);
    answer(c).then(
      (ok) => say({ id: c.id, ok }),
      (err) => say({ id: c.id, error: String(err?.message ?? err), code: err?.code ?? null }),
    );
  }
}
