import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defineAgent, openRuntime, type Runtime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { runSpans, useInMemoryTracing } from "./support.js";

const exporter = useInMemoryTracing();
const tempDir = useTempDir();

const waiter = defineAgent({
  name: "waiter",
  version: "1",
  run: async (turn, input: { ms: number }) => {
    await turn.sleep(input.ms);
    const answer = await turn.waitFor<{ ok: boolean }>("go", { timeoutMs: 60_000 });
    return answer;
  },
});

/** Poll the journal until the run ends (a woken run is executed by the wake loop). */
const ended = async (runtime: Runtime, runId: string) => {
  for (let i = 0; i < 200; i++) {
    const row = await runtime.run(runId);
    if (row && ["completed", "failed", "cancelled", "held"].includes(row.status)) return runtime.wait(runId);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`run ${runId} did not end`);
};

const ms = (t: readonly [number, number]) => t[0] * 1000 + t[1] / 1e6;

describe("tracing: a wait is a span", () => {
  it("a timer and a signal wait each get a span from run.waiting to the wake-up under the run span that goes on, also when the run waited in a runtime that closed", async () => {
    const store = join(tempDir(), "j.db");
    let runtime = await openRuntime({ store, agents: [waiter] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "waiter", content: { ms: 600 } });
    expect(await run.result).toMatchObject({ status: "waiting" });
    // The process that parked the run goes away: the next one reads when the wait began.
    await runtime.close();
    runtime = await openRuntime({ store, agents: [waiter] });
    try {
      for (let i = 0; i < 100; i++) {
        const row = await runtime.run(run.runId);
        if (
          row?.status === "waiting" &&
          (await runtime.events(run.runId)).some((e) => e.event.type === "run.woken")
        )
          break;
        await new Promise((r) => setTimeout(r, 50));
      }
      await runtime.signal(run.runId, "go", { ok: true }, { signalId: "s1", by: "ada" });
      const result = await ended(runtime, run.runId);
      expect(result, JSON.stringify(result)).toMatchObject({ status: "completed" });
    } finally {
      await runtime.close();
    }
    const spans = exporter.getFinishedSpans();
    const waits = spans.filter((s) => s.name.startsWith("holdfast.waiting "));
    expect(waits.map((s) => s.name)).toEqual(["holdfast.waiting timer", "holdfast.waiting signal"]);
    const [timer, signal] = waits;
    const events = await (async () => {
      const reader = await openRuntime({ store });
      try {
        return await reader.events(run.runId);
      } finally {
        await reader.close();
      }
    })();
    const at = (type: string, nth = 0) =>
      Date.parse(events.filter((e) => e.event.type === type)[nth]?.recordedAt ?? "");
    expect(ms(timer!.startTime)).toBeCloseTo(at("run.waiting", 0), -1);
    expect(ms(timer!.endTime)).toBeCloseTo(at("run.woken", 0), -1);
    expect(ms(timer!.endTime) - ms(timer!.startTime)).toBeGreaterThanOrEqual(590);
    expect(timer!.attributes).toMatchObject({
      "holdfast.wait.kind": "timer",
      "holdfast.call.id": `${run.runId}/0`,
    });
    expect(signal!.attributes).toMatchObject({
      "holdfast.wait.kind": "signal",
      "holdfast.signal.name": "go",
    });
    expect(ms(signal!.startTime)).toBeCloseTo(at("run.waiting", 1), -1);
    // Each wait span is the child of the run span that went on after the wake-up.
    const runs = runSpans(spans, run.runId);
    for (const wait of waits) {
      const parent = runs.find((s) => s.spanContext().spanId === wait.parentSpanContext?.spanId);
      expect(parent?.attributes["holdfast.run.resumed"]).toBe(true);
    }
  });
});
