/**
 * Where the PostgreSQL journal's time goes at 64 runs: its commit batches (how many requests each
 * holds, how long each takes) and every statement's time, by its SQL, while `runs` bench runs of
 * `calls` no-op calls each run together.
 *
 *   HOLDFAST_TEST_PG_URL=postgres://… npx tsx bench/tools/pg-batch-times.ts [runs=64] [calls=50]
 *
 * A statement's time runs from `query()` to its result reaching JavaScript, so it includes the
 * round trip and any wait for the event loop (the callers' own work between batches). Works in a
 * schema of its own, dropped at the end. Run it from a clone, on a quiet machine.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { openRuntime } from "../../src/index.js";
import { measuredRuns } from "../lib/runtime.js";
import { benchAgent, noopTool } from "../workload.js";

const runs = Number(process.argv[2] ?? 64);
const calls = Number(process.argv[3] ?? 50);
if (!Number.isSafeInteger(runs) || runs < 1 || !Number.isSafeInteger(calls) || calls < 1)
  throw new Error("usage: pg-batch-times.ts [runs] [calls]");
const url = process.env.HOLDFAST_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";

let measuring = false;
const statements = new Map<string, { n: number; ms: number }>();
const batches = { n: 0, requests: 0, ms: 0 };

// Every statement of the journal's pooled clients, timed until its result arrives.
const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
(pg.Client.prototype as unknown as { query: unknown }).query = function (this: unknown, ...args: unknown[]) {
  const config = args[0] as string | { text?: string; name?: string };
  const text = typeof config === "string" ? config : (config.text ?? "?");
  const key = text.replace(/\s+/g, " ").slice(0, 90);
  const started = performance.now();
  const result = query.apply(this, args);
  if (measuring && result instanceof Promise)
    result.then(
      () => {
        const entry = statements.get(key) ?? { n: 0, ms: 0 };
        entry.n += 1;
        entry.ms += performance.now() - started;
        statements.set(key, entry);
      },
      () => {},
    );
  return result;
};

// Each commit batch: its requests and its time from checkout to the callers' resolution.
type Batching = { commitBatch(batch: unknown[]): Promise<void> };
const journal = PostgresJournal.prototype as unknown as Batching;
const commitBatch = journal.commitBatch;
journal.commitBatch = async function (this: Batching, batch: unknown[]) {
  const started = performance.now();
  try {
    return await commitBatch.call(this, batch);
  } finally {
    if (measuring) {
      batches.n += 1;
      batches.requests += batch.length;
      batches.ms += performance.now() - started;
    }
  }
};

const schema = `hf_batch_times_${randomBytes(4).toString("hex")}`;
const admin = new pg.Client({ connectionString: url });
await admin.connect();
const runtime = await openRuntime({
  store: `${url}${url.includes("?") ? "&" : "?"}schema=${schema}`,
  agents: [benchAgent],
  tools: [noopTool],
  recovery: { onOpen: false },
});
try {
  const { events, wallMs, cpuMicros } = await measuredRuns(runtime, runs, calls, (on) => {
    measuring = on;
  });
  console.log(
    `${runs} runs × ${calls} calls: ${events} events in ${Math.round(wallMs)} ms (${Math.round(events / (wallMs / 1000))} events/s), ` +
      `${Math.round(cpuMicros / events)} µs CPU per event`,
  );
  console.log(
    `${batches.n} commit batches: ${(batches.requests / batches.n).toFixed(1)} requests and ${Math.round((batches.ms * 1000) / batches.n)} µs each`,
  );
  for (const [sql, entry] of [...statements].sort((a, b) => b[1].ms - a[1].ms).slice(0, 16))
    console.log(
      `${String(entry.n).padStart(7)} ${String(Math.round((entry.ms * 1000) / entry.n)).padStart(7)} µs each  ${sql}`,
    );
} finally {
  await runtime.close();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
}
