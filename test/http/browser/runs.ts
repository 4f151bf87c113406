import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { defineAgent, defineTool, openRuntime, type Runtime } from "../../../src/index.js";
import { countOf } from "../../support/witness.js";

/**
 * A journal with agents whose first call fails without proof on its first attempt (a reset
 * connection after the send), so the call is in doubt and the run is held. Every effect appends its
 * label to the witness file, which the journal knows nothing about:
 *  - `once`: `record(p)`, then `record(p-after)` (which never fails)
 *  - `pair`: `record(p-a)` and `record(p-b)` together (both in doubt), then `record(p-after)`
 */
export const openPanelRuntime = async (dir: string) => {
  const store = join(dir, "journal.db");
  const witness = join(dir, "witness.txt");
  const record = defineTool({
    name: "record",
    args: Schema.Struct({ label: Schema.String }),
    checkHint: ({ label }) => `the witness file has a line "${label}"`,
    run: async ({ label }, { attempt }) => {
      appendFileSync(witness, `${label}\n`);
      if (attempt === 1 && !label.endsWith("-after")) throw new Error("connection reset after send");
      return { label, recorded: true };
    },
  });
  const once = defineAgent({
    name: "once",
    version: "1",
    run: async (turn, input: { prefix: string }) => {
      const first = await turn.tool(record, { label: input.prefix });
      const after = await turn.tool(record, { label: `${input.prefix}-after` });
      return { first, after };
    },
  });
  const pair = defineAgent({
    name: "pair",
    version: "1",
    run: async (turn, input: { prefix: string }) => {
      const both = await turn.all([
        () => turn.tool(record, { label: `${input.prefix}-a` }),
        () => turn.tool(record, { label: `${input.prefix}-b` }),
      ]);
      const after = await turn.tool(record, { label: `${input.prefix}-after` });
      return { both, after };
    },
  });
  const runtime = await openRuntime({ store, agents: [once, pair], tools: [record] });
  return { store, witness, runtime, effects: (label: string) => countOf(witness, label) };
};

export interface HeldRun {
  readonly runId: string;
  readonly chatId: string;
  /** The stream version a decision is based on. */
  readonly version: number;
  /** The calls in doubt, in call order. */
  readonly calls: ReadonlyArray<string>;
}

/** Submit an input and wait until its run is held. */
export const heldRun = async (
  runtime: Runtime,
  agent: "once" | "pair",
  chatId: string,
  prefix = chatId,
): Promise<HeldRun> => {
  const handle = await runtime.submit({ chatId, inputId: "i", agent, content: { prefix } });
  const result = await handle.result;
  if (result.status !== "held") throw new Error(`run ${handle.runId} ended ${result.status}, not held`);
  const events = (await runtime.events(handle.runId)).map((e) => e.event);
  // From the events, not the result's reasons: each call failing in doubt holds the run again, and
  // the last run.held names only its own call.
  const settled = new Set(
    events.flatMap((e) => (e.type === "call.completed" || e.type === "call.failed" ? [e.callId] : [])),
  );
  return {
    runId: handle.runId,
    chatId,
    version: events.length,
    calls: events.flatMap((e) => (e.type === "call.intended" && !settled.has(e.callId) ? [e.callId] : [])),
  };
};

/** Poll `check` until it returns a value (not undefined), or fail naming `what` after `timeoutMs`. */
export const waitFor = async <T>(
  what: string,
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 15_000,
): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

const ENDED = new Set(["run.completed", "run.failed", "run.stopped"]);

/** Wait until the run has ended (completed, failed or stopped) and return its events' types. */
export const endedRun = (runtime: Runtime, runId: string): Promise<ReadonlyArray<string>> =>
  waitFor(`run ${runId} to end`, async () => {
    const types = (await runtime.events(runId)).map((e) => e.event.type);
    return ENDED.has(types.at(-1) ?? "") ? types : undefined;
  });
