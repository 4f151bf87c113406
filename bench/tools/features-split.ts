/**
 * Which part of a declared retry policy and timeout costs what (issue 37 item 6): one runtime,
 * runs whose calls rotate call by call through four no-op tools — none, `retry` only, `timeoutMs`
 * only, both — and prints each one's CPU per call (`process.cpuUsage` around the call) and p50,
 * with its ratio to the first:
 *
 *   npx tsx bench/tools/features-split.ts [runs=40] [calls=100]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Schema } from "effect";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { median } from "../lib/stats.js";

const runs = Number(process.argv[2] ?? 40);
const calls = Number(process.argv[3] ?? 100);
const policy = { attempts: 3, backoff: { initialMs: 100, maxMs: 1_000, factor: 2, jitter: 0.2 } };
const noop = (name: string, extra: { retry?: typeof policy; timeoutMs?: number }) =>
  defineTool({
    name,
    args: Schema.Struct({ i: Schema.Number }),
    disposition: "hold",
    ...extra,
    run: async () => null,
  });
const tools = [
  noop("split.none", {}),
  noop("split.retry", { retry: policy }),
  noop("split.timeout", { timeoutMs: 30_000 }),
  noop("split.both", { retry: policy, timeoutMs: 30_000 }),
];
const cpu = tools.map(() => 0);
const wall: number[][] = tools.map(() => []);
let measuring = false;

const agent = defineAgent({
  name: "split.agent",
  version: "1",
  run: async (turn, input: { readonly calls: number; readonly shift: number }) => {
    for (let i = 0; i < input.calls; i++) {
      const k = (i + input.shift) % tools.length;
      const started = process.cpuUsage();
      const at = performance.now();
      await turn.tool(tools[k]!, { i });
      const used = process.cpuUsage(started);
      if (!measuring) continue;
      cpu[k]! += used.user + used.system;
      wall[k]!.push((performance.now() - at) * 1000);
    }
    return input.calls;
  },
});

const dir = mkdtempSync(join(tmpdir(), "features-split-"));
const runtime = await openRuntime({
  store: join(dir, "journal.db"),
  agents: [agent],
  tools,
  recovery: { onOpen: false },
});
try {
  const run = async (chatId: string, shift: number) => {
    const handle = await runtime.submit({
      chatId,
      inputId: "input",
      agent: agent.name,
      content: { calls, shift },
    });
    const result = await handle.result;
    if (result.status !== "completed") throw new Error(`run ${handle.runId} ended ${result.status}`);
  };
  await run("warm-up", 0);
  measuring = true;
  for (let r = 0; r < runs; r++) await run(`split-${r}`, r % tools.length);
  tools.forEach((tool, k) => {
    const perCall = cpu[k]! / wall[k]!.length;
    process.stdout.write(
      `${tool.name.padEnd(14)} CPU ${perCall.toFixed(0)} µs/call (${(cpu[k]! / cpu[0]!).toFixed(3)} ×)  p50 ${median(wall[k]!).toFixed(0)} µs (${(median(wall[k]!) / median(wall[0]!)).toFixed(3)} ×)\n`,
    );
  });
} finally {
  await runtime.close();
  rmSync(dir, { recursive: true, force: true });
}
