import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { childrenOf, runSpans, useInMemoryTracing } from "./support.js";

const exporter = useInMemoryTracing();
const tempDir = useTempDir();

let started: () => void = () => undefined;
let release: () => void = () => undefined;
const waiting = defineTool({
  name: "waiting",
  args: Schema.Struct({}),
  run: async (_args, { signal }) =>
    new Promise((resolve, reject) => {
      release = () => resolve("done");
      signal.addEventListener("abort", () => reject(new DefiniteFailure("aborted before sending")));
      started();
    }),
});
const agent = defineAgent({
  name: "waiter",
  version: "1",
  run: async (turn) => {
    await turn.tool(waiting, {});
    return turn.tool(waiting, {}).catch(() => "second");
  },
});

describe("tracing: cancel and pause", () => {
  it("a cancelled run's span ends cancelled with the request as an event; a paused run's span ends paused and the resumed one links to it", async () => {
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent], tools: [waiting] });
    try {
      const start = async (chatId: string) => {
        const going = new Promise<void>((resolve) => {
          started = resolve;
        });
        const run = await runtime.submit({ chatId, inputId: "i", agent: "waiter", content: null });
        await going;
        return run;
      };
      const cancelled = await start("c1");
      await runtime.cancel(cancelled.runId, { by: "ada" });
      expect((await cancelled.result).status).toBe("cancelled");
      const paused = await start("c2");
      await runtime.pause(paused.runId, { by: "ada" });
      release();
      expect((await paused.result).status).toBe("paused");
      const resumed = await runtime.resume(paused.runId, { by: "ada" });
      const second = new Promise<void>((resolve) => {
        started = resolve;
      });
      await second;
      release();
      expect((await resumed.result).status).toBe("completed");
    } finally {
      await runtime.close();
    }
    const spans = exporter.getFinishedSpans();
    const byRun = (status: string) =>
      spans.find(
        (s) =>
          runSpans([s], String(s.attributes["holdfast.run.id"])).length > 0 &&
          s.attributes["holdfast.run.status"] === status,
      );
    const ended = byRun("cancelled");
    expect(ended?.events.map((e) => e.name)).toContain("holdfast.run.cancel_requested");
    expect(childrenOf(spans, ended!).map((s) => s.attributes["holdfast.call.outcome"])).toEqual(["failed"]);
    const parked = byRun("paused");
    const after = byRun("completed");
    expect(parked?.events.map((e) => e.name)).toContain("holdfast.run.pause_requested");
    expect(after?.links.map((l) => l.context.spanId)).toEqual([parked!.spanContext().spanId]);
  });
});
