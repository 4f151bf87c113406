/**
 * How long a prune keeps the journal's append lock from everybody else: a probe in another process
 * takes the lock over and over (PostgreSQL: the advisory append lock; libSQL: `BEGIN IMMEDIATE`)
 * while `holdfast`'s retention removes `runs` finished runs of 10 events each. The probe's longest
 * wait is the longest hold a lease renewal or an append would have met.
 *
 *   npx tsx bench/tools/prune-lock.ts libsql [runs=10000] [batch=100]
 *   HOLDFAST_TEST_PG_URL=postgres://… npx tsx bench/tools/prune-lock.ts postgres [runs=10000] [batch=100]
 *
 * Prints one JSON line. Works in a temp dir or a schema of its own, removed at the end. Run it from
 * a clone, on a quiet machine (decision 0040 records its figures).
 */
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import pg from "pg";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { runStreamId } from "../../src/events/index.js";
import type { AppendRequest, Journal } from "../../src/runtime/Journal.js";
import { FILLER_EVENTS_PER_RUN, fillerStream } from "../fixtures.js";

const url = process.env.HOLDFAST_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The probe: take the lock, note the wait, let it go, 2 ms apart, until stdin closes. */
const probe = async (engine: string, where: string): Promise<void> => {
  const waits: number[] = [];
  let open = true;
  process.stdin.on("end", () => {
    open = false;
  });
  process.stdin.resume();
  if (engine === "postgres") {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const lock = `SELECT pg_advisory_xact_lock(hashtext('holdfast.append.${where}'))`;
    process.stdout.write("ready\n");
    while (open) {
      const started = performance.now();
      await client.query("BEGIN");
      await client.query(lock);
      waits.push(performance.now() - started);
      await client.query("COMMIT");
      await sleep(2);
    }
    await client.end();
  } else {
    const db = new Database(where);
    db.pragma("busy_timeout = 0");
    process.stdout.write("ready\n");
    while (open) {
      const started = performance.now();
      for (;;) {
        try {
          db.exec("BEGIN IMMEDIATE");
          break;
        } catch {
          await sleep(1);
        }
      }
      waits.push(performance.now() - started);
      db.exec("COMMIT");
      await sleep(2);
    }
    db.close();
  }
  waits.sort((a, b) => a - b);
  const round = (ms: number) => Math.round(ms * 10) / 10;
  process.stdout.write(
    `${JSON.stringify({
      probes: waits.length,
      p50Ms: round(waits[Math.floor(waits.length * 0.5)] ?? 0),
      p99Ms: round(waits[Math.floor(waits.length * 0.99)] ?? 0),
      maxMs: round(waits.at(-1) ?? 0),
    })}\n`,
  );
};

/**
 * The prune's own holds of the lock, seen from inside: from the moment it has the lock (the
 * advisory lock returned, or `BEGIN IMMEDIATE` succeeded) until its `COMMIT` returned.
 */
const holds: number[] = [];
const watchHolds = (engine: string, journal: Journal): void => {
  let since = 0;
  const note = (text: string, done: number) => {
    if (/pg_advisory_xact_lock|^BEGIN IMMEDIATE/.test(text)) since = done;
    else if (text.startsWith("COMMIT") && since > 0) {
      holds.push(done - since);
      since = 0;
    }
  };
  if (engine === "libsql") {
    const db = (journal as LibsqlJournal).unsafeDatabase();
    const exec = db.exec.bind(db);
    db.exec = ((sql: string) => {
      const result = exec(sql);
      note(sql, performance.now());
      return result;
    }) as typeof db.exec;
    return;
  }
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: unknown }).query = function (
    this: unknown,
    ...args: unknown[]
  ) {
    const config = args[0] as string | { text?: string };
    const text = typeof config === "string" ? config : (config.text ?? "");
    const result = query.apply(this, args);
    if (result instanceof Promise)
      void result.then(
        () => note(text, performance.now()),
        () => {},
      );
    return result;
  };
};

/** `runs` finished runs, 10 events each, five runs per chat, written 500 streams per commit. */
const seed = async (journal: Journal & { readonly fingerprintKey: Uint8Array }, runs: number) => {
  for (let start = 0; start < runs; start += 500) {
    const requests: AppendRequest[] = [];
    for (let n = start; n < Math.min(runs, start + 500); n++)
      requests.push({
        streamId: runStreamId(`pruned-${n}`),
        expectedVersion: "no-stream",
        events: fillerStream({
          key: journal.fingerprintKey,
          runId: `pruned-${n}`,
          chatId: `chat-${n % Math.max(1, Math.floor(runs / 5))}`,
          inputId: `input-${n}`,
          calls: (FILLER_EVENTS_PER_RUN - 2) / 2,
        }),
      });
    await journal.appendAll(requests);
  }
};

const measure = async (engine: string, runs: number, batchRuns: number | undefined): Promise<void> => {
  const dir = mkdtempSync(join(tmpdir(), "holdfast-prune-lock-"));
  const schema = `hf_prune_lock_${randomBytes(4).toString("hex")}`;
  const store = engine === "postgres" ? withSchema(url, schema) : join(dir, "journal.db");
  const journal = engine === "postgres" ? await PostgresJournal.open(store) : LibsqlJournal.open(store);
  try {
    await seed(journal, runs);
    const child = spawn(
      process.execPath,
      [...process.execArgv, process.argv[1]!, "probe", engine, engine === "postgres" ? schema : store],
      {
        stdio: ["pipe", "pipe", "inherit"],
      },
    );
    let output = "";
    let ready!: () => void;
    const probing = new Promise<void>((resolve) => {
      ready = resolve;
    });
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (output.startsWith("ready\n")) ready();
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    await probing;
    await sleep(100);
    watchHolds(engine, journal);
    const started = performance.now();
    const report = await journal.prune({
      keepRuns: 0,
      keepDays: 0,
      ...(batchRuns === undefined ? {} : { batchRuns }),
    });
    const pruneMs = Math.round(performance.now() - started);
    await sleep(100);
    child.stdin.end();
    await exited;
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"]).toString().trim();
    // `records` is absent before decision 0040: one retention.pruned, one transaction.
    const transactions =
      (report as { records?: ReadonlyArray<unknown> }).records?.length ?? (report.recorded ? 1 : 0);
    process.stdout.write(
      `${JSON.stringify({ engine, commit, batch: batchRuns ?? "default", runs: report.pruned.length, events: runs * FILLER_EVENTS_PER_RUN, transactions, pruneMs, holdMs: spread(holds), lockWait: JSON.parse(output.slice("ready\n".length)) })}\n`,
    );
  } finally {
    await journal.close();
    rmSync(dir, { recursive: true, force: true });
    if (engine === "postgres") {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    }
  }
};

const spread = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => Math.round((sorted[Math.floor(sorted.length * q)] ?? 0) * 10) / 10;
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: Math.round((sorted.at(-1) ?? 0) * 10) / 10 };
};

const withSchema = (base: string, schema: string): string => {
  const u = new URL(base);
  u.searchParams.set("schema", schema);
  return u.toString();
};

const [first, second, third] = process.argv.slice(2);
if (first === "probe") await probe(second!, third!);
else if (first === "libsql" || first === "postgres")
  await measure(first, Number(second ?? 10_000), third === undefined ? undefined : Number(third));
else throw new Error("usage: prune-lock.ts <libsql|postgres> [runs] [batch]");
