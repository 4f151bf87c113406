// Review findings on `holdfast replay` (issue 36 item 1, decision 0082): clean-up hooks, scheduled
// retries, cancelled runs, runs that ended, secrets, and the sandboxed journal.
import { execFileSync } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { openStoreReader } from "../../src/adapters/store.js";
import { DefiniteFailure, defineAgent, defineTool, openRuntime, replayRuns } from "../../src/index.js";
import { sandbox } from "../../src/runtime/replay.js";
import { useTempDir } from "../support/tmp.js";
import { agents as retryAgents, tools as retryTools } from "./retry-agents.js";

const tempDir = useTempDir();
const HERE = import.meta.dirname;

describe("replay, review findings", () => {
  it("never runs a reconciler's clean-up (settled): the witness file is unchanged", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    const witness = join(dir, "settled.txt");
    writeFileSync(witness, "");
    const tool = defineTool({
      name: "t",
      args: Schema.Struct({ x: Schema.Number }),
      reconciler: {
        name: "r",
        check: async () => ({ outcome: "unknown", evidence: null }),
        settled: ({ idempotencyKey }) => appendFileSync(witness, `settled ${idempotencyKey}\n`),
      },
      run: async ({ x }) => x,
    });
    const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(tool, { x: 1 }) });
    const runtime = await openRuntime({ store, agents: [agent], tools: [tool] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
    expect(await run.result).toMatchObject({ status: "completed" });
    await runtime.close();
    const before = readFileSync(witness, "utf8");
    expect(before).toContain("settled");
    const report = await replayRuns({ agents: [agent], tools: [tool], store });
    expect(report.runs).toEqual([expect.objectContaining({ result: "same" })]);
    expect(readFileSync(witness, "utf8")).toBe(before);
  });

  it("a run waiting for a scheduled retry continues live at that call at once, without waiting", async () => {
    const store = join(tempDir(), "journal.db");
    execFileSync(process.execPath, ["--import", "tsx", join(HERE, "retry-record.ts"), store]);
    const started = Date.now();
    const report = await replayRuns({ agents: retryAgents, tools: retryTools, store, timeoutMs: 5_000 });
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(report.runs).toEqual([
      expect.objectContaining({
        result: "continues-live",
        seq: 0,
        detail: expect.stringContaining("waits for a retry (attempt 2)"),
      }),
    ]);
  }, 30_000);

  it("a cancelled run replayed with its own code is the same: the cancel is delivered where it was recorded", async () => {
    const store = join(tempDir(), "journal.db");
    const undo = defineTool({ name: "undo", args: Schema.Struct({}), run: async () => "undone" });
    let started = false;
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        try {
          return await turn.model("m", { p: 1 }, async (_args, context) => {
            started = true;
            await new Promise((_resolve, reject) =>
              context.signal.addEventListener("abort", () => reject(new DefiniteFailure("aborted"))),
            );
          });
        } catch (error) {
          if (turn.signal.aborted) await turn.cleanup(() => turn.tool(undo, {}));
          throw error;
        }
      },
    });
    const runtime = await openRuntime({ store, agents: [agent], tools: [undo] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
    while (!started) await new Promise((resolve) => setTimeout(resolve, 20));
    await runtime.cancel(run.runId, { by: "me", note: "stop" });
    expect(await run.result).toMatchObject({ status: "cancelled" });
    await runtime.close();
    const report = await replayRuns({ agents: [agent], tools: [undo], store });
    expect(report.runs).toEqual([{ runId: run.runId, agent: "a@1", result: "same", calls: 2 }]);
  });

  it("a failed run whose code now goes on past its recorded calls diverges (it does not continue live)", async () => {
    const store = join(tempDir(), "journal.db");
    const tool = defineTool({
      name: "t",
      args: Schema.Struct({ x: Schema.Number }),
      run: async () => {
        throw new DefiniteFailure("no");
      },
    });
    const version = (catchIt: boolean) =>
      defineAgent({
        name: "a",
        version: "1",
        run: async (turn) => {
          try {
            return await turn.tool(tool, { x: 1 });
          } catch (error) {
            if (!catchIt) throw new Error(`gave up: ${String(error)}`);
            return turn.tool(tool, { x: 2 });
          }
        },
      });
    const runtime = await openRuntime({ store, agents: [version(false)], tools: [tool] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
    expect(await run.result).toMatchObject({ status: "failed" });
    await runtime.close();
    const report = await replayRuns({ agents: [version(true)], tools: [tool], store });
    expect(report.divergences).toBe(1);
    expect(report.runs[0]).toMatchObject({
      result: "divergence",
      divergence: {
        seq: 1,
        recorded: null,
        now: { kind: "tool", name: "t" },
        detail: expect.stringContaining("the run ended (failed) after its 1 recorded call(s)"),
      },
    });
  });

  it("a difference only in a secret's value says so", async () => {
    const store = join(tempDir(), "journal.db");
    const agent = (key: string) =>
      defineAgent({
        name: "a",
        version: "1",
        run: async (turn) => turn.model("m", { headers: { authorization: key }, p: 1 }, async () => "ok"),
      });
    const runtime = await openRuntime({
      store,
      agents: [agent("prod-key-123456789")],
      secrets: { K: "prod-key-123456789" },
    });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
    await run.result;
    await runtime.close();
    const report = await replayRuns({
      agents: [agent("ci-key-987654321")],
      secrets: { K: "ci-key-987654321" },
      store,
    });
    expect(report.runs[0]).toMatchObject({
      result: "divergence",
      divergence: {
        detail: expect.stringContaining(
          "differs only in a masked (secret) value — this environment's secret differs from the one recorded",
        ),
      },
    });
  });

  it("an agent that outlives the timeout is stopped: its later calls are refused", async () => {
    const store = join(tempDir(), "journal.db");
    let late: unknown;
    let slow = false;
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        // Waits on something outside the turn, only when replayed (slow), then calls on.
        if (slow) await new Promise((resolve) => setTimeout(resolve, 400));
        try {
          return await turn.model("m", { p: 1 }, async () => "ok");
        } catch (error) {
          late = error;
          throw error;
        }
      },
    });
    const runtime = await openRuntime({ store, agents: [agent] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
    expect(await run.result).toMatchObject({ status: "completed" });
    await runtime.close();
    slow = true;
    const report = await replayRuns({ agents: [agent], store, timeoutMs: 100 });
    expect(report.runs[0]).toMatchObject({ result: "error", detail: expect.stringContaining("100 ms") });
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(late).toMatchObject({ _tag: "LeaseLost" });
  });

  it("an unknown run id, or --run with a filter, is refused with the id", async () => {
    const store = join(tempDir(), "journal.db");
    const agent = defineAgent({ name: "a", version: "1", run: async () => "ok" });
    const runtime = await openRuntime({ store, agents: [agent] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
    await run.result;
    await runtime.close();
    await expect(replayRuns({ agents: [agent], store, runIds: ["nope"] })).rejects.toThrow(/has no run nope/);
    await expect(
      replayRuns({ agents: [agent], store, runIds: [run.runId], status: ["completed"] }),
    ).rejects.toThrow(/not both/);
  });

  it("the replay's journal refuses every method it does not allow, and reads pass", async () => {
    const store = join(tempDir(), "journal.db");
    const agent = defineAgent({ name: "a", version: "1", run: async () => "ok" });
    const runtime = await openRuntime({ store, agents: [agent] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: {} });
    await run.result;
    await runtime.close();
    const reader = await openStoreReader(store);
    try {
      const journal = sandbox(reader, new Uint8Array(32)) as unknown as Record<
        string,
        (...args: unknown[]) => Promise<unknown>
      >;
      expect(await journal.readStream?.(`run-${run.runId}`)).toBeDefined();
      for (const method of ["withdrawRuntime", "announceRuntime", "claim", "recordAlerts", "anythingNew"])
        await expect(journal[method]?.()).rejects.toThrow(`a replay never writes to the journal (${method})`);
    } finally {
      await reader.close();
    }
  });
});
