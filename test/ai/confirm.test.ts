import { join } from "node:path";
import { APICallError, generateText } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { journaledModel } from "../../src/ai.js";
import { defineAgent, InvalidInput, openRuntime } from "../../src/index.js";
import { lineOf, runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { count, eventsOf, type Mode, openAiRuntime, submitTrip, versionOf } from "./given.js";

const tempDir = useTempDir();
const AI_WORKER = join(import.meta.dirname, "..", "support", "ai-worker.ts");
const MODES: ReadonlyArray<Mode> = ["generate", "stream"];

const badGateway = () =>
  new APICallError({ message: "bad gateway", url: "u", requestBodyValues: {}, statusCode: 502 });

// A journaled model must never leave a promise rejected with nobody to hear it: Node would exit.
const unhandled: unknown[] = [];
const hear = (reason: unknown): void => {
  unhandled.push(reason);
};
beforeEach(() => {
  unhandled.length = 0;
  process.on("unhandledRejection", hear);
});
afterEach(() => {
  process.off("unhandledRejection", hear);
});

/** The travel agent's first model call answered with a 502: in doubt, the run held. */
const heldTrip = async (mode: Mode) => {
  const { runtime, witness } = await openAiRuntime(tempDir(), {
    mode,
    failStep: { step: 1, times: 1, error: badGateway },
  });
  const { runId, result } = await submitTrip(runtime);
  expect(result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
  return { runtime, witness, runId, version: await versionOf(runtime, runId) };
};

const confirm = (version: number, result?: unknown) => ({
  basedOnVersion: version,
  decidedBy: "ada",
  decision: "confirmed-completed" as const,
  note: "the provider's dashboard shows the request answered",
  ...(result === undefined ? {} : { result }),
});

describe.each(MODES)("a person's answer for a %s model call", (mode) => {
  it(`R1: "It happened" without the answer is refused, saying what to enter; nothing is written (${mode})`, async () => {
    const { runtime, runId, version } = await heldTrip(mode);
    const refused = runtime.decide(runId, confirm(version));
    await expect(refused).rejects.toBeInstanceOf(InvalidInput);
    await expect(refused).rejects.toThrow(/\{"text": "…"\}.*new-attempt/);
    expect(await versionOf(runtime, runId)).toBe(version);
    await runtime.close();
  });

  it(`R1: "It happened" with the person's answer: the run completes with that text (${mode})`, async () => {
    const { runtime, witness, runId, version } = await heldTrip(mode);
    const decided = await runtime.decide(runId, confirm(version, { text: "Hello from the dashboard" }));
    expect(decided.unchecked).toEqual([]);
    expect(await decided.result).toMatchObject({
      status: "completed",
      output: { text: "Hello from the dashboard", steps: 1 },
    });
    expect(count(witness, `model:${mode}:1`)).toBe(1);
    expect(unhandled).toEqual([]);
    await runtime.close();
  });

  it(`R1: the tool calls of the person's answer run, and the loop goes on from them (${mode})`, async () => {
    const { runtime, witness, runId, version } = await heldTrip(mode);
    const decided = await runtime.decide(
      runId,
      confirm(version, { text: "", toolCalls: [{ toolName: "lookup", input: { city: "Paris" } }] }),
    );
    expect(await decided.result).toMatchObject({
      status: "completed",
      output: { text: "Booked your flight to Paris. Have a good trip!", steps: 3 },
    });
    const recorded = (await eventsOf(runtime, runId)).find((e) => e.type === "decision.recorded");
    expect(recorded).toMatchObject({
      calls: [
        {
          result: {
            text: "",
            toolCalls: [{ toolName: "lookup", input: { city: "Paris" }, toolCallId: `${runId}-0-tool-1` }],
          },
        },
      ],
    });
    expect(count(witness, "tool:lookup:Paris")).toBe(1);
    expect(count(witness, `model:${mode}:1`)).toBe(1);
    expect(unhandled).toEqual([]);
    await runtime.close();
  });

  it(`R1: an answer that does not fit is refused naming the field; nothing is written (${mode})`, async () => {
    const { runtime, runId, version } = await heldTrip(mode);
    await expect(runtime.decide(runId, confirm(version, { txt: "Hello" }))).rejects.toThrow(/text/);
    await expect(
      runtime.decide(
        runId,
        confirm(version, { text: "x", toolCalls: [{ toolName: "lookup", input: "Paris" }] }),
      ),
    ).rejects.toThrow(/toolCalls\.0\.input/);
    expect(await versionOf(runtime, runId)).toBe(version);
    await runtime.close();
  });
});

describe("a confirmed model call after a restart", () => {
  it("R1: a journal whose streamed model call was confirmed opens again with its agent, completes, and the process stays up", async () => {
    const dir = tempDir();
    const env = { HF_DB: join(dir, "journal.db"), HF_WITNESS: join(dir, "witness.txt"), HF_MODE: "stream" };
    const first = await runScript(AI_WORKER, { ...env, HF_FAIL_FIRST: "1" });
    expect(first.code, first.stderr).toBe(0);
    const runId = lineOf(first, "submitted")?.runId as string;
    expect(lineOf(first, "result")?.result).toMatchObject({ status: "held" });
    // An operator's process records the decision; only a process with the agent goes on with it.
    const operator = await openRuntime({ store: env.HF_DB, agents: [], allowlist: {} });
    await operator.decide(runId, confirm(await versionOf(operator, runId), { text: "Hello" }));
    await operator.close();
    const reopened = await runScript(AI_WORKER, { ...env, HF_REOPEN: "1", HF_RUN: runId });
    expect(reopened.code, reopened.stderr).toBe(0);
    expect(lineOf(reopened, "result")?.result).toMatchObject({
      status: "completed",
      output: { text: "Hello", steps: 1 },
    });
  });

  it("a stored outcome the AI SDK cannot use fails its run with StoredOutcomeUnusable; nothing escapes", async () => {
    const usage = {
      inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: 1, text: 1, reasoning: 0 },
    };
    const model = new MockLanguageModelV3({
      doGenerate: async () => ({
        content: [{ type: "tool-call", toolCallId: "c", toolName: "t" } as never],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      }),
    });
    const agent = defineAgent({
      name: "odd",
      version: "1",
      run: async (turn) => (await generateText({ model: journaledModel(turn, model), prompt: "hi" })).text,
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent], allowlist: {} });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "odd", content: null });
    expect(await run.result).toMatchObject({
      status: "failed",
      error: { name: "StoredOutcomeUnusable" },
    });
    expect(unhandled).toEqual([]);
    await runtime.close();
  });
});
