import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("closing a runtime", () => {
  it("close lets a live run finish: its lease is still renewed while close waits, so its next effect starts", async () => {
    const db = join(tempDir(), "journal.db");
    let startedSlow!: () => void;
    const slowStarted = new Promise<void>((resolve) => {
      startedSlow = resolve;
    });
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({}),
      run: async () => {
        startedSlow();
        // Several leases long: the run outlives the lease only if the heartbeat keeps it.
        await new Promise((r) => setTimeout(r, 7_000));
        return { slow: true };
      },
    });
    const after = defineTool({ name: "after", args: Schema.Struct({}), run: async () => ({ after: true }) });
    const agent = defineAgent({
      name: "two-steps",
      version: "1",
      run: async (turn) => {
        await turn.tool(slow, {});
        return turn.tool(after, {});
      },
    });
    const runtime = await openRuntime({
      store: db,
      agents: [agent],
      tools: [slow, after],
      recovery: { leaseMs: 3_000 },
    });
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "two-steps", content: null });
    await slowStarted;
    const closed = runtime.close();
    const result = await handle.result;
    await closed;
    expect(result).toMatchObject({ status: "completed", output: { after: true } });
  }, 30_000);
});
