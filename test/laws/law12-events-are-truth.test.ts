import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { RecordedEvent } from "../../src/events/index.js";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { contextOf, foldRun, statusOf } from "../../src/machines/index.js";
import { foldProjection, inlineProjections } from "../../src/projections/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const readEverything = async (journal: LibsqlJournal): Promise<RecordedEvent[]> => {
  const all: RecordedEvent[] = [];
  for (;;) {
    const page = await journal.readAll({ after: all.at(-1)?.position ?? 0, limit: 7 });
    if (page.length === 0) return all;
    all.push(...page);
  }
};

describe("law 12 — events are the source of truth", () => {
  it("every inline projection equals the projection rebuilt from the events, and run status equals the machine fold", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const ok = defineTool({
      name: "ok",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }) => n * 2,
    });
    const bad = defineTool({
      name: "bad",
      args: Schema.Struct({}),
      run: async () => {
        throw new DefiniteFailure("no");
      },
    });
    const flaky = defineTool({
      name: "flaky",
      args: Schema.Struct({}),
      run: async () => {
        throw new Error("connection reset");
      },
    });
    const agent = defineAgent({
      name: "mixed",
      version: "1",
      run: async (turn, input: { mode: string }) => {
        const a = await turn.tool(ok, { n: 1 });
        await turn.checkpoint({ a });
        if (input.mode === "fail") await turn.tool(bad, {});
        if (input.mode === "hold") await turn.tool(flaky, {});
        return a;
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [ok, bad, flaky] });
    for (const [i, mode] of ["done", "fail", "hold", "done"].entries()) {
      const run = await rt.submit({ chatId: `chat-${i}`, inputId: "m", agent: "mixed", content: { mode } });
      await run.result;
    }
    await rt.close();

    const journal = LibsqlJournal.open(db);
    const events = await readEverything(journal);
    for (const projection of inlineProjections) {
      const rebuilt = foldProjection(projection, events);
      const stored = await journal.projectionRows(projection.name);
      expect(stored).toHaveLength(rebuilt.size);
      expect(new Set(stored.map((r) => JSON.stringify(r)))).toEqual(
        new Set([...rebuilt.values()].map((r) => JSON.stringify(r))),
      );
    }
    const runs = await journal.projectionRows<{ runId: string; status: string }>("runs");
    // The unhandled definite failure holds its run for a person (a retry grant or stop).
    expect(runs.map((r) => r.status).sort()).toEqual(["completed", "completed", "held", "held"]);
    for (const row of runs) {
      const fold = foldRun(events.filter((e) => e.streamId === `run-${row.runId}`).map((e) => e.event));
      expect(statusOf(fold)).toBe(row.status);
      expect(contextOf(fold).runId).toBe(row.runId);
    }
    await journal.close();
  });
});

describe("runtime.audit", () => {
  it("a journal written by real runs, including a held one, audits clean through the public API", async () => {
    const dir = tempDir();
    const flaky = defineTool({
      name: "flaky",
      args: Schema.Struct({}),
      run: async () => {
        throw new Error("connection reset");
      },
    });
    const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(flaky, {}) });
    const rt = await openRuntime({ store: join(dir, "j.db"), agents: [agent], tools: [flaky] });
    expect(
      (await (await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: null })).result).status,
    ).toBe("held");
    const report = await rt.audit();
    expect(report.findings).toEqual([]);
    await rt.close();
  });
});
