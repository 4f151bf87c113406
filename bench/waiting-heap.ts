/**
 * `node --expose-gc --import tsx bench/waiting-heap.ts [runs]`: the heap a runtime holds for runs
 * that wait (`turn.sleep` of an hour, decision 0050), against the same runtime with none. A waiting
 * run should hold no execution: what is left per run is the runtime's bookkeeping, if any.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as Schema from "effect/Schema";
import { defineAgent, defineTool, openRuntime } from "../src/index.js";

const runs = Number(process.argv[2] ?? 1_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

const step = defineTool({
  name: "step",
  args: Schema.Struct({ n: Schema.Number }),
  run: async ({ n }) => ({ n, payload: "x".repeat(2_000) }),
});
const sleeper = defineAgent({
  name: "sleeper",
  version: "1",
  run: async (turn, input: { n: number }) => {
    await turn.tool(step, { n: input.n });
    await turn.sleep(3_600_000);
    return "awake";
  },
});

const heap = async (): Promise<number> => {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
  }
  return process.memoryUsage().heapUsed;
};

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "holdfast-waiting-heap-"));
  const runtime = await openRuntime({
    store: join(dir, "journal.db"),
    agents: [sleeper],
    tools: [step],
    tracing: false,
  });
  try {
    // One run first, so code paths and caches are warm in the baseline.
    const warm = await runtime.submit({ chatId: "warm", inputId: "i", agent: "sleeper", content: { n: -1 } });
    await warm.result;
    const before = await heap();
    for (let from = 0; from < runs; from += 50) {
      const handles = await Promise.all(
        Array.from({ length: Math.min(50, runs - from) }, (_, k) =>
          runtime.submit({
            chatId: `c${from + k}`,
            inputId: "i",
            agent: "sleeper",
            content: { n: from + k },
          }),
        ),
      );
      for (const handle of handles) {
        const result = await handle.result;
        if (result.status !== "waiting") throw new Error(`run ${handle.runId} is ${result.status}`);
      }
    }
    const after = await heap();
    const waiting = (await runtime.runs()).filter((r) => r.status === "waiting").length;
    process.stdout.write(
      `${JSON.stringify({
        runs,
        waiting,
        executing: runtime.executing,
        heapBeforeMiB: +(before / 2 ** 20).toFixed(2),
        heapAfterMiB: +(after / 2 ** 20).toFixed(2),
        bytesPerWaitingRun: Math.round((after - before) / runs),
        node: process.version,
      })}\n`,
    );
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

await main();
