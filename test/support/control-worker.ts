/**
 * A real holdfast process that owns a run whose call never answers, for the cancel crash test.
 * Configured by environment:
 *   HF_DB        journal (libSQL file or PostgreSQL URL)
 *   HF_WITNESS   witness file: one JSON line per effect that started
 *   HF_KIND      "tool" (a tool with disposition hold) or "model" (a model call declared replayable),
 *                or "pause": the `pausable` agent, two `step` calls; the first waits for HF_RELEASE
 *   HF_RELEASE   (pause) a file whose existence lets a step finish
 *   or HF_KIND "plan": the `planner` agent, one replace of the chat's plan (a document call)
 * Prints `{kind: "started", runId}` when the effect starts and `{kind: "aborted"}` when its signal is
 * aborted (by a cancel); the effect ignores the abort, so the process waits out a long grace until
 * the test kills it with SIGKILL.
 */
import { appendFileSync, existsSync } from "node:fs";
import * as Schema from "effect/Schema";
import { type CallContext, defineAgent, defineTool, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

const hang = (context: CallContext): Promise<never> => {
  appendFileSync(
    env.HF_WITNESS!,
    `${JSON.stringify({ callId: context.callId, attempt: context.attempt })}\n`,
  );
  context.signal.addEventListener("abort", () => out({ kind: "aborted" }));
  out({ kind: "started", runId: context.runId });
  return new Promise<never>(() => undefined);
};

export const stuck = defineTool({
  name: "stuck",
  args: Schema.Struct({}),
  run: async (_args, context) => hang(context),
});

export const stubborn = defineAgent({
  name: "stubborn",
  version: "1",
  run: async (turn, input: { kind: string }) =>
    input.kind === "tool"
      ? turn.tool(stuck, {})
      : turn.model("ask", {}, async (_args, context) => hang(context), { inDoubt: "replay" }),
});

/** A step that records its effect, then finishes once the release file exists. */
export const step = defineTool({
  name: "step",
  args: Schema.Struct({ n: Schema.Number }),
  run: async ({ n }, context) => {
    appendFileSync(env.HF_WITNESS!, `${JSON.stringify({ step: n, attempt: context.attempt })}\n`);
    out({ kind: "started", runId: context.runId, step: n });
    while (!existsSync(env.HF_RELEASE!)) await new Promise((r) => setTimeout(r, 50));
    return { n };
  },
});

/** Two steps in a row: a pause asked during the first parks the run before the second. */
export const pausable = defineAgent({
  name: "pausable",
  version: "1",
  run: async (turn) => [await turn.tool(step, { n: 1 }), await turn.tool(step, { n: 2 })],
});

/** One replace of the chat's plan: an internal effect, committed with its call's intent. */
export const planner = defineAgent({
  name: "planner",
  version: "1",
  run: async (turn) => turn.plan.replace(0, { title: "planned", items: [] }),
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [stubborn, pausable, planner],
    tools: [stuck, step],
    recovery: { leaseMs: 3_000, onOpen: false },
    cancelGraceMs: 600_000,
  });
  const agent = env.HF_KIND === "pause" ? "pausable" : env.HF_KIND === "plan" ? "planner" : "stubborn";
  await runtime.submit({ chatId: "c", inputId: "i", agent, content: { kind: env.HF_KIND } });
  // Stay up as an application would (the runtime's own timers do not keep a process alive).
  setInterval(() => undefined, 1_000);
};

if (env.HF_DB) {
  main().catch((error) => {
    out({ kind: "crash", message: String(error?.stack ?? error) });
    process.exit(1);
  });
}
