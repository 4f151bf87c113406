import { randomBytes } from "node:crypto";
import pg from "pg";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { maskUrl } from "../../src/adapters/stores/postgres/url.js";
import { openRuntime, type Runtime } from "../../src/index.js";
import { figure, type Metric, skipped, targeted } from "../lib/metric.js";
import { progress } from "../lib/progress.js";
import { runToCompletion } from "../lib/runtime.js";
import type { Section } from "../lib/section.js";
import { median, microsSince, round, spreadOf } from "../lib/stats.js";
import { benchAgent, noopTool, setCallSink } from "../workload.js";
import { CONCURRENCY, type Sample, sample } from "./concurrency.js";
import { deliveryMetrics, measureDelivery } from "./subscriptions.js";

const DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/test";
const ROW = "x".repeat(400);
const BATCH_ROWS = 100;

const withSchema = (url: string, schema: string): string => {
  const u = new URL(url);
  u.searchParams.set("schema", schema);
  return u.toString();
};

/** The floor on the server: plain inserts in a table of the bench's schema, one client. */
class PgFloor {
  readonly single: number[] = [];
  readonly batched: number[] = [];
  private readonly batchSql: string;
  constructor(private readonly client: pg.Client) {
    this.batchSql = `INSERT INTO floor (data) VALUES ${Array.from({ length: BATCH_ROWS }, (_, i) => `($${i + 1})`).join(", ")}`;
  }
  static async open(url: string, schema: string): Promise<PgFloor> {
    const client = new pg.Client({
      connectionString: url,
      options: `-c search_path=${schema} -c synchronous_commit=on`,
    });
    await client.connect();
    await client.query("CREATE TABLE floor (id bigserial PRIMARY KEY, data text NOT NULL)");
    const floor = new PgFloor(client);
    await floor.sampleSingle(20);
    await floor.sampleBatched(5);
    floor.single.length = 0;
    floor.batched.length = 0;
    return floor;
  }
  /** One row per commit (an INSERT outside a transaction is one). */
  async sampleSingle(commits: number): Promise<void> {
    for (let c = 0; c < commits; c++) {
      const started = process.hrtime.bigint();
      await this.client.query("INSERT INTO floor (data) VALUES ($1)", [ROW]);
      this.single.push(microsSince(started));
    }
  }
  /** BATCH_ROWS rows per commit, in one statement (one round trip, as a group commit would be). */
  async sampleBatched(commits: number): Promise<void> {
    const rows = Array.from({ length: BATCH_ROWS }, () => ROW);
    for (let c = 0; c < commits; c++) {
      const started = process.hrtime.bigint();
      await this.client.query(this.batchSql, rows);
      this.batched.push(microsSince(started));
    }
  }
  close(): Promise<void> {
    return this.client.end();
  }
}

const skippedAll = (why: string): Metric[] => [
  skipped("postgres.floor.single.commit", "µs/commit", null, why),
  skipped("postgres.sequential.call", "µs/call", null, why),
  skipped("postgres.concurrency.c64.events_per_s", "events/s", null, why),
  skipped("postgres.subscriptions.delivery.p99", "ms", null, why),
];

/** 7. The core measurements on PostgreSQL, in fresh schemas dropped afterwards. */
export const postgresSection: Section = {
  name: "postgres",
  async run({ options }) {
    const url = process.env.HOLDFAST_TEST_PG_URL || DEFAULT_URL;
    const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
    try {
      await admin.connect();
    } catch (cause) {
      return {
        metrics: skippedAll(
          `PostgreSQL not reachable at ${maskUrl(url)} (${String(cause)}); set HOLDFAST_TEST_PG_URL to measure it`,
        ),
      };
    }
    const schema = `hf_bench_${randomBytes(4).toString("hex")}`;
    const store = withSchema(url, schema);
    let floor: PgFloor | null = null;
    let runtime: Runtime | null = null;
    try {
      // The journal wants a schema of its own; the floor's table lives next to it.
      await admin.query(`CREATE SCHEMA ${schema}_floor`);
      const version = (await admin.query("SHOW server_version")).rows[0]?.server_version as string;
      progress("postgres", `PostgreSQL ${version} at ${maskUrl(url)}, schema ${schema}`);
      floor = await PgFloor.open(url, `${schema}_floor`);
      runtime = await openRuntime({
        store,
        agents: [benchAgent],
        tools: [noopTool],
        recovery: { onOpen: false },
      });
      await runToCompletion(runtime, "warm-up", 20);

      // Sequential: runs of 100 calls alternating with floor commits.
      const rounds = options.quick ? 1 : 6;
      const calls: number[] = [];
      const floorSingle: number[] = [];
      for (let r = 0; r < rounds; r++) {
        const before = floor.single.length;
        await floor.sampleSingle(50);
        floorSingle.push(...floor.single.slice(before));
        setCallSink((us) => calls.push(us));
        await runToCompletion(runtime, `pg-sequential-${r}`, 100);
        setCallSink(null);
      }
      progress("postgres", `sequential: ${calls.length} calls`);

      // Concurrency: 1, 8 and 64 runs in parallel, the batched floor sampled alongside.
      const samplesPerLevel = options.quick ? 1 : 2;
      const callsPerRun = options.quick ? 10 : 50;
      const results = new Map<number, Sample[]>(CONCURRENCY.map((c) => [c, []]));
      const floorBatched: number[] = [];
      for (let s = 0; s < samplesPerLevel; s++) {
        for (const c of CONCURRENCY) {
          const before = floor.batched.length;
          await floor.sampleBatched(10);
          floorBatched.push(...floor.batched.slice(before));
          results.get(c)!.push(await sample(runtime, c, callsPerRun, `pg-c${c}-s${s}`));
        }
      }
      progress("postgres", "concurrency done; now subscriptions");
      await runtime.close();
      runtime = null;

      // Subscriptions: the same live-subscriber measurement on a PostgreSQL journal.
      const journal = await PostgresJournal.open(store);
      let delivery: Awaited<ReturnType<typeof measureDelivery>>;
      try {
        delivery = await measureDelivery(
          journal,
          journal.fingerprintKey,
          options.quick ? 1 : 5,
          50,
          "pg-sub",
        );
      } finally {
        await journal.close();
      }

      const single = spreadOf(floorSingle);
      const call = spreadOf(calls);
      const batchedRowsPerS = (BATCH_ROWS * 1e6) / median(floorBatched);
      const metrics: Metric[] = [
        figure({
          name: "postgres.floor.single.commit",
          value: round(single.median),
          unit: "µs/commit",
          spread: { n: single.n, p95: round(single.p95), min: round(single.min), max: round(single.max) },
          note: `one 400-byte row per INSERT (its own transaction), synchronous_commit=on, PostgreSQL ${version} on this machine`,
        }),
        figure({
          name: "postgres.floor.batched100.rows_per_s",
          value: round(batchedRowsPerS),
          unit: "rows/s",
          note: `${BATCH_ROWS} rows per transaction, one multi-row INSERT`,
        }),
        targeted(
          {
            name: "postgres.sequential.call",
            value: round(call.median),
            unit: "µs/call",
            ratio: round(call.median / single.median),
            spread: { n: call.n, p95: round(call.p95), min: round(call.min), max: round(call.max) },
            note: `median of ${call.n} no-op tool calls, 100 per run, on a PostgreSQL runtime; ratio to the PostgreSQL single-row commit`,
          },
          "<=",
          3,
        ),
      ];
      for (const c of CONCURRENCY) {
        const samples = results.get(c)!;
        const callsPerS = median(samples.map((x) => x.calls / x.seconds));
        const eventsPerS = median(samples.map((x) => x.events / x.seconds));
        metrics.push(
          figure({
            name: `postgres.concurrency.c${c}.calls_per_s`,
            value: round(callsPerS),
            unit: "calls/s",
            note: `${c} run(s) in parallel, ${callsPerRun} no-op calls each, ${samples.length} sample(s)`,
          }),
        );
        const events = {
          name: `postgres.concurrency.c${c}.events_per_s`,
          value: round(eventsPerS),
          unit: "events/s",
          ratio: round(eventsPerS / batchedRowsPerS),
          note: `journaled events/s over the PostgreSQL batched floor's ${round(batchedRowsPerS)} rows/s`,
        };
        metrics.push(c === 64 ? targeted(events, ">=", 0.25) : figure(events));
      }
      metrics.push(...deliveryMetrics("postgres.subscriptions", delivery, "a PostgreSQL journal", null));
      metrics.push(
        figure({
          name: "postgres.not_measured",
          value: null,
          unit: "",
          note: "recovery and audit are measured on libSQL only (their fixtures are written through LibsqlJournal)",
        }),
      );
      return { metrics };
    } finally {
      setCallSink(null);
      if (runtime) await runtime.close().catch(() => undefined);
      if (floor) await floor.close().catch(() => undefined);
      for (const name of [schema, `${schema}_floor`])
        await admin.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`).catch(() => undefined);
      await admin.end();
    }
  },
};
