import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime, type Runtime, type RuntimeOptions } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Every effect that ran, in order: a sleep that was waited twice or a step run twice shows here. */
const effects: string[] = [];

const note = defineTool({
  name: "note",
  args: Schema.Struct({ step: Schema.String }),
  run: async ({ step }) => {
    effects.push(step);
    return step;
  },
});

const napper = defineAgent({
  name: "napper",
  version: "1",
  run: async (turn, input: { ms: number }) => {
    await turn.tool(note, { step: "before" });
    await turn.sleep(input.ms);
    await turn.tool(note, { step: "after" });
    return "rested";
  },
});

const engines: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["libSQL", async () => join(tempDir(), "journal.db")],
  [
    "PostgreSQL",
    async () => {
      await requirePg();
      return pgUrl(schemas.fresh());
    },
  ],
];

const open = (store: string, extra: Partial<RuntimeOptions> = {}): Promise<Runtime> =>
  openRuntime({ store, agents: [napper], tools: [note], tracing: false, ...extra });

/** Wait (polling the journal) until `runId` ends; a woken run is executed by the wake loop. */
const ended = async (runtime: Runtime, runId: string) => {
  for (;;) {
    const row = await runtime.run(runId);
    if (row && ["completed", "failed", "stopped", "cancelled", "held"].includes(row.status))
      return runtime.wait(runId);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe.each(engines)("durable sleep (%s)", (_name, storeOf) => {
  it("a sleeping run parks, holds no execution, and is woken once after its due time", async () => {
    effects.length = 0;
    const runtime = await open(await storeOf());
    try {
      const startedAt = Date.now();
      const handle = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "napper",
        content: { ms: 400 },
      });
      const parked = await handle.result;
      expect(parked.status).toBe("waiting");
      expect(runtime.executing).toBe(0);
      expect((await runtime.run(handle.runId))?.status).toBe("waiting");
      const result = await ended(runtime, handle.runId);
      expect(result).toMatchObject({ status: "completed", output: "rested" });
      const events = await runtime.events(handle.runId);
      const woken = events.filter((e) => e.event.type === "run.woken");
      expect(woken).toHaveLength(1);
      const w = woken[0]!.event;
      if (w.type !== "run.woken") throw new Error("not woken");
      expect(Date.parse(w.firedAt)).toBeGreaterThanOrEqual(Date.parse(w.dueAt));
      expect(Date.parse(w.dueAt)).toBeGreaterThanOrEqual(startedAt + 400);
      // The step before the sleep ran once: the re-execution served it, and the sleep, from the journal.
      expect(effects).toEqual(["before", "after"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});
