import { join } from "node:path";
import { jsonSchema, tool } from "ai";
import { describe, expect, it } from "vitest";
import { fromAiTool, journaledTools } from "../../src/ai.js";
import type { RecordedEvent } from "../../src/events/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const AI_WORKER = join(import.meta.dirname, "..", "support", "ai-worker.ts");
const tempDir = useTempDir();

/** The run's events once it completed, read by a runtime without agents (it runs nothing). */
const completedEvents = async (store: string, runId: string): Promise<ReadonlyArray<RecordedEvent>> => {
  const reader = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
  try {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const row = await reader.run(runId);
      if (row?.status === "completed") return await reader.events(runId);
      if (Date.now() > deadline) throw new Error(`run ${runId} is still ${row?.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await reader.close();
  }
};

describe("holdfast/ai: a needsApproval tool in a generateText loop", () => {
  it("waits durably, survives a SIGKILL, and continues once approved through the API; the tool runs once, no model call is made twice", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const env = { HF_DB: db, HF_WITNESS: witness, HF_APPROVAL: "1" };
    const first = startScript(AI_WORKER, { ...env, HF_STAY: "1" });
    await first.waitFor("result");
    const runId = String(first.lines.find((l) => l.kind === "submitted")!.runId);
    expect(first.lines.find((l) => l.kind === "result")!.result).toMatchObject({
      status: "waiting",
      wait: "approval",
      callId: `${runId}/3`,
    });
    // The loop stopped before `book`: the model was asked twice, the lookup ran, the booking did not.
    expect(witnessLines(witness)).toEqual(["model:generate:1", "tool:lookup:Paris", "model:generate:2"]);
    await first.kill();

    const server = startScript(AI_WORKER, { ...env, HF_SERVE: "1" });
    try {
      await server.waitFor("serving");
      const serving = server.lines.find((l) => l.kind === "serving")!;
      const reader = await openRuntime({ store: db, tracing: false, recovery: { onOpen: false } });
      const version = (await reader.events(runId)).at(-1)!.version;
      expect((await reader.run(runId))?.status).toBe("waiting");
      await reader.close();
      const response = await fetch(`${serving.url}/api/runs/${runId}/calls/3/approve`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${serving.token}` },
        body: JSON.stringify({ basedOnVersion: version, by: "ada", note: "fine" }),
      });
      expect(response.status).toBe(200);
      const events = await completedEvents(db, runId);
      const done = events.at(-1)!.event;
      expect(done).toMatchObject({
        type: "run.completed",
        output: { text: "Booked your flight to Paris. Have a good trip!", steps: 3 },
      });
      expect(witnessLines(witness)).toEqual([
        "model:generate:1",
        "tool:lookup:Paris",
        "model:generate:2",
        "tool:book:HF-501",
        "model:generate:3",
      ]);
      const book = events.flatMap((e) =>
        e.event.type === "call.intended" && e.event.name === "book" ? [e.event] : [],
      );
      expect(book.map((i) => [i.attempt, i.approval !== undefined])).toEqual([
        [1, true],
        [2, false],
      ]);
    } finally {
      await server.kill();
    }
  });
});

describe("holdfast/ai: needsApproval as a function", () => {
  const make = (needsApproval: (input: { amount: number }) => unknown) =>
    fromAiTool(
      "refund",
      tool({
        description: "Refund",
        inputSchema: jsonSchema<{ amount: number }>({
          type: "object",
          properties: { amount: { type: "number" } },
        }),
        needsApproval: needsApproval as (input: { amount: number }) => boolean,
        execute: async ({ amount }) => `refunded ${amount}`,
      }),
    );

  it("is asked for each new call with the input: true parks the run for approval, false runs the call", async () => {
    const refund = make(({ amount }) => amount > 100);
    const agent = defineAgent({
      name: "refunder",
      version: "1",
      run: async (turn, input: { amount: number }) => {
        const tools = journaledTools(turn, [refund]);
        return tools.refund.execute!(input, { toolCallId: "t1", messages: [] });
      },
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "journal.db"),
      agents: [agent],
      tools: [refund],
      tracing: false,
    });
    try {
      const small = await runtime.submit({
        chatId: "a",
        inputId: "i",
        agent: "refunder",
        content: { amount: 5 },
      });
      expect(await small.result).toMatchObject({ status: "completed", output: "refunded 5" });
      const large = await runtime.submit({
        chatId: "b",
        inputId: "i",
        agent: "refunder",
        content: { amount: 500 },
      });
      expect(await large.result).toMatchObject({ status: "waiting", wait: "approval" });
    } finally {
      await runtime.close();
    }
  });

  it("a needsApproval that answers with a promise is refused clearly, and nothing is written for the call", async () => {
    const refund = make(async () => false);
    const agent = defineAgent({
      name: "refunder",
      version: "1",
      run: async (turn) => {
        const tools = journaledTools(turn, [refund]);
        try {
          return await tools.refund.execute!({ amount: 5 }, { toolCallId: "t1", messages: [] });
        } catch (error) {
          return String((error as Error).message);
        }
      },
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "journal.db"),
      agents: [agent],
      tools: [refund],
      tracing: false,
    });
    try {
      const handle = await runtime.submit({ chatId: "a", inputId: "i", agent: "refunder", content: null });
      const result = await handle.result;
      expect(result).toMatchObject({
        status: "completed",
        output: expect.stringContaining("returned a promise"),
      });
      expect((await runtime.events(handle.runId)).some((e) => e.event.type === "call.intended")).toBe(false);
    } finally {
      await runtime.close();
    }
  });
});
