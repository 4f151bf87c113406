import { randomBytes } from "node:crypto";
import { loadavg } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { maskUrl } from "../../src/adapters/stores/postgres/url.js";
import { runsPage } from "../../src/adapters/surfaces/http/views.js";
import type { JournalReader } from "../../src/runtime/Journal.js";
import { heldRunId, type RunsFixture, writeRuns, writeRunsFixture } from "../fixtures.js";
import { figure, type Metric, skipped, targeted } from "../lib/metric.js";
import { progress, throttled } from "../lib/progress.js";
import type { Section } from "../lib/section.js";
import { percentile, round, spreadOf } from "../lib/stats.js";

/** DESIGN §12: the runs list and its search ≤ 10 ms p50 at 100,000 runs. */
const TARGET_MS = 10;

type Query = Parameters<typeof runsPage>[1];

/** Time `runsPage` per query, interleaved so a change of load falls on every query alike. */
const measure = async (
  reader: JournalReader,
  queries: ReadonlyArray<{ readonly name: string; readonly query: () => Query }>,
  rounds: number,
): Promise<Map<string, { samples: number[]; runs: number; bytes: number }>> => {
  const results = new Map(queries.map((q) => [q.name, { samples: [] as number[], runs: 0, bytes: 0 }]));
  for (let round = -3; round < rounds; round++)
    for (const { name, query } of queries) {
      const started = performance.now();
      const page = await runsPage(reader, query());
      // What the API does with it too: one JSON body.
      const bytes = JSON.stringify(page).length;
      const ms = performance.now() - started;
      if (round < 0) continue;
      const result = results.get(name)!;
      result.samples.push(ms);
      result.runs = page.runs.length;
      result.bytes = bytes;
    }
  return results;
};

/** The queries of the search section, each timed over `rounds` rounds, as metrics named `prefix.*`. */
const measureQueries = async (
  reader: JournalReader,
  options: {
    readonly prefix: string;
    readonly rounds: number;
    readonly fixture: RunsFixture;
    /** Where the reader is, for the notes. */
    readonly where: string;
  },
): Promise<Metric[]> => {
  const { prefix, rounds, fixture } = options;
  const metrics: Metric[] = [];
  const needle = heldRunId(321);
  const [row] = (await runsPage(reader, { id: needle, limit: 1 })).runs;
  if (!row) throw new Error(`bench search: the fixture has no run ${needle}`);
  const at = Date.parse(row.admittedAt);
  const from = new Date(at - 1000).toISOString();
  const to = new Date(at + 1000).toISOString();
  // A cursor 100 pages (5,000 runs) into the list.
  let deep = await runsPage(reader, { limit: 50 });
  for (let i = 0; i < 100 && deep.next; i++) deep = await runsPage(reader, { limit: 50, cursor: deep.next });
  const deepCursor = deep.next ?? undefined;
  const queries = [
    { name: "first_page", query: () => ({ limit: 50 }) },
    { name: "deep_page", query: () => ({ limit: 50, ...(deepCursor ? { cursor: deepCursor } : {}) }) },
    { name: "held", query: () => ({ status: "held" as const, limit: 50 }) },
    { name: "stalled", query: () => ({ status: "stalled" as const, limit: 50 }) },
    { name: "chat_and_time", query: () => ({ chat: row.chatId, from, to, limit: 50 }) },
    { name: "agent", query: () => ({ agent: row.agent, limit: 50 }) },
    { name: "id_prefix", query: () => ({ id: needle.slice(0, -1), limit: 50 }) },
  ];
  const measured = await measure(reader, queries, rounds);
  for (const { name } of queries) {
    const { samples, runs: listed, bytes } = measured.get(name)!;
    const s = spreadOf(samples);
    const note = `runsPage(${JSON.stringify(queries.find((q) => q.name === name)!.query())}) over a journal of ${fixture.runs.toLocaleString("en-US")} runs (${fixture.held.toLocaleString("en-US")} held, ${fixture.events.toLocaleString("en-US")} events), ${options.where}, JSON body included; ${listed} runs, ${bytes.toLocaleString("en-US")} bytes; ${rounds} samples; load average ${loadavg()[0]!.toFixed(1)} at the end`;
    metrics.push(
      targeted(
        { name: `${prefix}.${name}.p50`, value: round(s.median), unit: "ms", ratio: null, note },
        "<=",
        TARGET_MS,
        "value",
      ),
      figure({
        name: `${prefix}.${name}.p99`,
        value: round(percentile(samples, 99)),
        unit: "ms",
        spread: { n: s.n, p95: round(s.p95), min: round(s.min), max: round(s.max) },
      }),
    );
  }
  return metrics;
};

const PG_DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/test";

/** The same queries on PostgreSQL, over the same runs written to a schema of their own (dropped afterwards). */
const onPostgres = async (rounds: number): Promise<Metric[]> => {
  const url = process.env.HOLDFAST_TEST_PG_URL || PG_DEFAULT_URL;
  const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await admin.connect();
  } catch (cause) {
    return [
      skipped(
        "search.postgres",
        "ms",
        `value <= ${TARGET_MS}`,
        `PostgreSQL not reachable at ${maskUrl(url)} (${String(cause)}); set HOLDFAST_TEST_PG_URL to measure it`,
      ),
    ];
  }
  const schema = `hf_bench_search_${randomBytes(4).toString("hex")}`;
  const store = new URL(url);
  store.searchParams.set("schema", schema);
  let journal: PostgresJournal | null = null;
  try {
    journal = await PostgresJournal.open(store.toString());
    progress("search", `PostgreSQL at ${maskUrl(url)}, schema ${schema}`);
    const fixture = await writeRuns(journal, {
      runs: RUNS,
      heldEvery: HELD_EVERY,
      onProgress: throttled("search", "writing runs to PostgreSQL", 5000),
    });
    // Fresh tables: statistics now, as autovacuum would give them soon after such a load.
    const tables = await admin.query<{ tablename: string }>(
      "SELECT tablename FROM pg_tables WHERE schemaname = $1",
      [schema],
    );
    for (const { tablename } of tables.rows) await admin.query(`ANALYZE ${schema}."${tablename}"`);
    progress("search", `PostgreSQL: runs list and search, ${rounds} rounds`);
    return await measureQueries(journal, {
      prefix: "search.postgres",
      rounds,
      fixture,
      where: `PostgreSQL (schema of its own, one server on this machine), reader in this process`,
    });
  } finally {
    if (journal) await journal.close().catch(() => undefined);
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await admin.end();
  }
};

const RUNS = 100_000;
const HELD_EVERY = 100;

/**
 * 9. The runs list and its search over 100,000 runs (decision 0073): the first page, a page deep in
 * the list, held runs, stalled runs, a chat within a time range, an agent, an id prefix — each read
 * through the run index, in process (the work `GET /api/runs` does, HTTP aside); on libSQL, then
 * (full runs only) on PostgreSQL when it is reachable.
 */
export const searchSection: Section = {
  name: "search",
  async run({ options, temp }) {
    const path = join(temp.folder("search"), "journal.db");
    const fixture = await writeRunsFixture(path, {
      runs: RUNS,
      heldEvery: HELD_EVERY,
      onProgress: throttled("search", "writing runs", 5000),
    });
    const rounds = options.quick ? 20 : 100;
    const reader = LibsqlJournal.openReadOnly(path);
    const metrics: Metric[] = [];
    try {
      progress("search", `runs list and search, ${rounds} rounds over ${RUNS.toLocaleString("en-US")} runs`);
      metrics.push(
        ...(await measureQueries(reader, {
          prefix: "search",
          rounds,
          fixture,
          where: "libSQL, read-only reader in this process",
        })),
      );
    } finally {
      await reader.close();
    }
    // Writing 100,000 runs to PostgreSQL takes minutes: a quick run would not stay under a minute.
    if (options.quick)
      metrics.push(
        skipped(
          "search.postgres",
          "ms",
          `value <= ${TARGET_MS}`,
          "--quick: writing 100,000 runs to PostgreSQL takes about 3 minutes; a full run measures it",
        ),
      );
    else metrics.push(...(await onPostgres(rounds)));
    return { metrics };
  },
};
