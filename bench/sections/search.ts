import { join } from "node:path";
import { runsPage } from "../../src/adapters/http/views.js";
import { LibsqlJournal } from "../../src/adapters/libsql/LibsqlJournal.js";
import type { JournalReader } from "../../src/runtime/Journal.js";
import { heldRunId, writeRunsFixture } from "../fixtures.js";
import { figure, type Metric, targeted } from "../lib/metric.js";
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

/**
 * 9. The runs list and its search over 100,000 runs (decision 0073): the first page, a page deep in
 * the list, held runs, stalled runs, a chat within a time range, an agent, an id prefix — each read
 * through the run index, in process (the work `GET /api/runs` does, HTTP aside).
 */
export const searchSection: Section = {
  name: "search",
  async run({ options, temp }) {
    const path = join(temp.folder("search"), "journal.db");
    const runs = 100_000;
    const fixture = await writeRunsFixture(path, {
      runs,
      heldEvery: 100,
      onProgress: throttled("search", "writing runs", 5000),
    });
    const reader = LibsqlJournal.openReadOnly(path);
    const metrics: Metric[] = [];
    try {
      const needle = heldRunId(321);
      const [row] = (await runsPage(reader, { id: needle, limit: 1 })).runs;
      if (!row) throw new Error(`bench search: the fixture has no run ${needle}`);
      const at = Date.parse(row.admittedAt);
      const from = new Date(at - 1000).toISOString();
      const to = new Date(at + 1000).toISOString();
      // A cursor 100 pages (5,000 runs) into the list.
      let deep = await runsPage(reader, { limit: 50 });
      for (let i = 0; i < 100 && deep.next; i++)
        deep = await runsPage(reader, { limit: 50, cursor: deep.next });
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
      const rounds = options.quick ? 20 : 100;
      progress("search", `runs list and search, ${rounds} rounds over ${runs.toLocaleString("en-US")} runs`);
      const measured = await measure(reader, queries, rounds);
      for (const { name } of queries) {
        const { samples, runs: listed, bytes } = measured.get(name)!;
        const s = spreadOf(samples);
        const note = `runsPage(${JSON.stringify(queries.find((q) => q.name === name)!.query())}) over a journal of ${runs.toLocaleString("en-US")} runs (${fixture.held.toLocaleString("en-US")} held, ${fixture.events.toLocaleString("en-US")} events), read-only reader in this process, JSON body included; ${listed} runs, ${bytes.toLocaleString("en-US")} bytes; ${rounds} samples`;
        metrics.push(
          targeted(
            { name: `search.${name}.p50`, value: round(s.median), unit: "ms", ratio: null, note },
            "<=",
            TARGET_MS,
            "value",
          ),
          figure({
            name: `search.${name}.p99`,
            value: round(percentile(samples, 99)),
            unit: "ms",
            spread: { n: s.n, p95: round(s.p95), min: round(s.min), max: round(s.max) },
          }),
        );
      }
    } finally {
      await reader.close();
    }
    return { metrics };
  },
};
