import { join } from "node:path";
import { expect } from "vitest";
import type { ModelPolicy } from "../../src/ai.js";
import type { AnyEvent, EventOf } from "../../src/events/index.js";
import { openRuntime, type Runtime } from "../../src/index.js";
import { type AiSetupOptions, makeAiAgent } from "../support/ai-agent.js";
import { lineOf, runScript } from "../support/processes.js";
import { witnessLines } from "../support/witness.js";

const AI_WORKER = join(import.meta.dirname, "..", "support", "ai-worker.ts");

export type Mode = "generate" | "stream";

/** A journal in `dir` with the travel agent, its model and tools counted by the witness file. */
export const openAiRuntime = async (
  dir: string,
  options: Omit<AiSetupOptions, "witness"> = {},
): Promise<{ runtime: Runtime; witness: string }> => {
  const witness = join(dir, "witness.txt");
  const { agent, tools } = makeAiAgent({ ...options, witness });
  const runtime = await openRuntime({
    store: join(dir, "journal.db"),
    agents: [agent],
    tools: [...tools.all],
    allowlist: {},
    retry: { maxAttempts: 3 },
    recovery: { onOpen: false },
  });
  return { runtime, witness };
};

export const submitTrip = async (runtime: Runtime, city = "Paris") => {
  const handle = await runtime.submit({
    chatId: "chat",
    inputId: "message",
    agent: "travel",
    content: { city },
  });
  return { runId: handle.runId, result: await handle.result };
};

/** How many times the witness saw the provider asked (any step, or one step) and each tool run. */
export const count = (witness: string, line: string): number =>
  witnessLines(witness).filter((l) => l === line).length;

export const modelCalls = (witness: string): number =>
  witnessLines(witness).filter((l) => l.startsWith("model:")).length;

export const intents = (events: ReadonlyArray<AnyEvent>): EventOf<"call.intended">[] =>
  events.filter((e): e is EventOf<"call.intended"> => e.type === "call.intended");

export const outcomes = (events: ReadonlyArray<AnyEvent>): EventOf<"call.completed">[] =>
  events.filter((e): e is EventOf<"call.completed"> => e.type === "call.completed");

export interface CrashScenario {
  readonly mode: Mode;
  readonly crashAt: string;
  readonly crashCall: string;
  /** Let this many matching crash-point hits pass first. */
  readonly skip?: number;
  readonly policy?: ModelPolicy;
}

/**
 * The travel agent in a child process, SIGKILLed at a crash point; then, in this process, the
 * journal opened again with the same agent and recovered. The witness counts across both.
 */
export const crashAndRecover = async (dir: string, scenario: CrashScenario) => {
  const witness = join(dir, "witness.txt");
  const first = await runScript(AI_WORKER, {
    HF_DB: join(dir, "journal.db"),
    HF_WITNESS: witness,
    HF_MODE: scenario.mode,
    HF_POLICY: scenario.policy?.inDoubt ?? "hold",
    HOLDFAST_CRASH_AT: scenario.crashAt,
    HOLDFAST_CRASH_CALL: scenario.crashCall,
    HOLDFAST_CRASH_SKIP: String(scenario.skip ?? 0),
  });
  expect(first.signal, `${first.stderr}\n${JSON.stringify(first.lines)}`).toBe("SIGKILL");
  const runId = lineOf(first, "submitted")?.runId as string;
  const witnessedBeforeRecovery = witnessLines(witness);
  const { runtime } = await openAiRuntime(dir, {
    mode: scenario.mode,
    ...(scenario.policy ? { policy: scenario.policy } : {}),
  });
  const report = await runtime.recover();
  const results = await report.done;
  return { runtime, runId, report, results, witness, witnessedBeforeRecovery };
};

export const eventsOf = async (runtime: Runtime, runId: string): Promise<AnyEvent[]> =>
  (await runtime.events(runId)).map((e) => e.event);

export const versionOf = async (runtime: Runtime, runId: string): Promise<number> =>
  (await runtime.events(runId)).at(-1)?.version ?? 0;
