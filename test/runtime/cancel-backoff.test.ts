import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

let attempts = 0;
/** Refused every time, with a long backoff declared: the run sits in its durable wait. */
const busy = defineTool({
  name: "busy",
  args: Schema.Struct({}),
  retry: { attempts: 3, backoff: { initialMs: 600_000, maxMs: 600_000, factor: 1, jitter: 0 } },
  run: async () => {
    attempts++;
    throw new DefiniteFailure("rate limited", { status: 429 });
  },
});

const agent = defineAgent({
  name: "waits",
  version: "1",
  run: async (turn) => turn.tool(busy, {}),
});

describe("cancel during a durable backoff", () => {
  it("ends the wait at once: the run is cancelled, the scheduled attempt never starts, the audit is clean", async () => {
    const store = join(tempDir(), "journal.db");
    const runtime = await openRuntime({ store, agents: [agent], tools: [busy], cancelGraceMs: 60_000 });
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "m1", agent: "waits", content: {} });
      await expect
        .poll(
          async () => (await runtime.events(handle.runId)).some((e) => e.event.type === "retry.scheduled"),
          { timeout: 20_000 },
        )
        .toBe(true);
      const outcome = await runtime.cancel(handle.runId, { by: "ada", note: "no longer needed" });
      expect(outcome.accepted).toBe(true);
      // Without the cancel ending the wait, this would wait the 10 minutes of the backoff.
      expect(await handle.result).toMatchObject({ status: "cancelled" });
      expect(attempts).toBe(1);
      const types = (await runtime.events(handle.runId)).map((e) => e.event.type);
      expect(types.filter((t) => t === "call.intended")).toHaveLength(1);
      expect(types.at(-1)).toBe("run.cancelled");
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});
