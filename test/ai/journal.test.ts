import { join } from "node:path";
import { APICallError, generateText, streamText } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { effectInputSchema, journaledModel } from "../../src/ai.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { MODEL_NAME } from "../support/ai-agent.js";
import { useTempDir } from "../support/tmp.js";
import {
  count,
  eventsOf,
  intents,
  type Mode,
  openAiRuntime,
  outcomes,
  submitTrip,
  versionOf,
} from "./given.js";

const tempDir = useTempDir();

const MODES: ReadonlyArray<Mode> = ["generate", "stream"];

describe.each(MODES)("holdfast/ai, %s", (mode) => {
  it("journals one intent and one outcome per model call and per tool call, in the model's order", async () => {
    const { runtime, witness } = await openAiRuntime(tempDir(), { mode });
    const { runId, result } = await submitTrip(runtime);
    expect(result).toMatchObject({
      status: "completed",
      output: { text: "Booked your flight to Paris. Have a good trip!", steps: 3 },
    });
    const events = await eventsOf(runtime, runId);
    expect(intents(events).map((e) => e.name)).toEqual([
      MODEL_NAME,
      "lookup",
      MODEL_NAME,
      "book",
      MODEL_NAME,
    ]);
    expect(outcomes(events).map((e) => e.callId)).toEqual(intents(events).map((e) => e.callId));
    expect(events.filter((e) => e.type === "call.failed")).toEqual([]);
    // Once each, really.
    expect([1, 2, 3].map((step) => count(witness, `model:${mode}:${step}`))).toEqual([1, 1, 1]);
    expect(count(witness, "tool:lookup:Paris")).toBe(1);
    expect(count(witness, "tool:book:HF-501")).toBe(1);
    await runtime.close();
  });

  it("records the prompt and the tools offered in the intent, and the result without raw bodies", async () => {
    const { runtime } = await openAiRuntime(tempDir(), { mode });
    const { runId } = await submitTrip(runtime);
    const events = await eventsOf(runtime, runId);
    const [first, , second] = intents(events);
    expect(first).toMatchObject({ kind: "model", disposition: "hold", pin: null });
    expect(first?.args).toMatchObject({
      mode,
      provider: "mock-provider",
      modelId: "mock-model-id",
      prompt: [{ role: "user", content: [{ type: "text", text: "fly to Paris" }] }],
      tools: [
        {
          type: "function",
          name: "lookup",
          description: "Flights to a city",
          inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
        { type: "function", name: "book", description: "Book a flight" },
      ],
    });
    // The second model call is asked with the tool's result.
    expect(JSON.stringify(second?.args)).toContain("HF-501");
    const stored = JSON.stringify(outcomes(events));
    expect(stored).not.toContain("raw request body");
    expect(stored).not.toContain("raw response body");
    expect(stored).toContain('{"$holdfast":"date","value":"2026-01-01T00:00:00.000Z"}');
    await runtime.close();
  });

  it("a tool starts only after the outcome of the model call that asked for it is committed", async () => {
    const { runtime } = await openAiRuntime(tempDir(), { mode });
    const { runId } = await submitTrip(runtime);
    const recorded = await runtime.events(runId);
    const at = (type: string, callId: string) =>
      recorded.find((e) => e.event.type === type && "callId" in e.event && e.event.callId === callId)
        ?.version ?? Number.NaN;
    for (const [model, tool] of [
      [0, 1],
      [2, 3],
    ]) {
      expect(at("call.completed", `${runId}/${model}`)).toBeLessThan(at("call.intended", `${runId}/${tool}`));
    }
    await runtime.close();
  });

  it("parallel tool calls take their seq in the model's order, whichever finishes first", async () => {
    const { runtime, witness } = await openAiRuntime(tempDir(), {
      mode,
      parallel: true,
      lookupMs: { Paris: 150, Oslo: 0 },
    });
    const { runId, result } = await submitTrip(runtime);
    expect(result.status).toBe("completed");
    const events = await eventsOf(runtime, runId);
    const lookups = intents(events).filter((e) => e.name === "lookup");
    expect(lookups.map((e) => [e.seq, e.args])).toEqual([
      [1, { city: "Paris" }],
      [2, { city: "Oslo" }],
    ]);
    // Oslo's outcome came first; each has exactly one.
    expect(
      outcomes(events)
        .filter((e) => lookups.some((l) => l.callId === e.callId))
        .map((e) => e.callId),
    ).toEqual([`${runId}/2`, `${runId}/1`]);
    expect(count(witness, "tool:lookup:Oslo")).toBe(1);
    await runtime.close();
  });

  it("a refusal the provider answers with 4xx is a definite failure; a retry grant asks the model again", async () => {
    const refusal = () =>
      new APICallError({
        message: "rate limited",
        url: "https://provider.example/v1/chat",
        requestBodyValues: {},
        statusCode: 429,
        isRetryable: true,
      });
    const { runtime, witness } = await openAiRuntime(tempDir(), {
      mode,
      failStep: { step: 2, times: 1, error: refusal },
    });
    const { runId, result } = await submitTrip(runtime);
    const callId = `${runId}/2`;
    expect(result).toMatchObject({ status: "held", reasons: [{ code: "decision-needed", callId }] });
    expect(await eventsOf(runtime, runId)).toContainEqual(
      expect.objectContaining({
        type: "call.failed",
        callId,
        definite: true,
        error: expect.objectContaining({
          name: "DefiniteFailure",
          details: { statusCode: 429, isRetryable: true },
        }),
      }),
    );
    const granted = await runtime.grantRetry(runId, callId, {
      attempts: 1,
      grantedBy: "ada",
      note: "quota reset",
    });
    expect(await granted.result).toMatchObject({ status: "completed" });
    const events = await eventsOf(runtime, runId);
    expect(
      intents(events)
        .filter((e) => e.callId === callId)
        .map((e) => e.attempt),
    ).toEqual([1, 2]);
    // The first model call and the lookup were served from the journal on re-execution.
    expect(count(witness, `model:${mode}:1`)).toBe(1);
    expect(count(witness, `model:${mode}:2`)).toBe(2);
    expect(count(witness, "tool:lookup:Paris")).toBe(1);
    await runtime.close();
  });

  it("an error that proves nothing (a 5xx) leaves the model call in doubt: the run is held, the model not asked again", async () => {
    const unavailable = () =>
      new APICallError({
        message: "upstream reset",
        url: "https://provider.example/v1/chat",
        requestBodyValues: {},
        statusCode: 502,
      });
    const { runtime, witness } = await openAiRuntime(tempDir(), {
      mode,
      failStep: { step: 2, times: 1, error: unavailable },
    });
    const { runId, result } = await submitTrip(runtime);
    expect(result).toMatchObject({
      status: "held",
      reasons: [{ code: "indefinite-failure", callId: `${runId}/2` }],
    });
    expect(count(witness, `model:${mode}:2`)).toBe(1);
    expect(count(witness, "tool:book:HF-501")).toBe(0);
    await runtime.close();
  });

  it("a tool call that fails definitely reaches the model as a tool error, and the loop goes on", async () => {
    const { runtime, witness } = await openAiRuntime(tempDir(), { mode, bookFails: "definite" });
    const { runId, result } = await submitTrip(runtime);
    expect(result).toMatchObject({
      status: "completed",
      output: { text: expect.stringContaining("I could not book it"), steps: 3 },
    });
    expect(await eventsOf(runtime, runId)).toContainEqual(
      expect.objectContaining({ type: "call.failed", callId: `${runId}/3`, definite: true }),
    );
    expect(count(witness, "tool:book:HF-501")).toBe(1);
    expect(count(witness, `model:${mode}:3`)).toBe(1);
    await runtime.close();
  });

  it("a tool call left in doubt holds the run; the loop's next model call is refused, the model not asked", async () => {
    const { runtime, witness } = await openAiRuntime(tempDir(), { mode, bookFails: "indefinite" });
    const { runId, result } = await submitTrip(runtime);
    expect(result).toMatchObject({
      status: "held",
      reasons: [{ code: "indefinite-failure", callId: `${runId}/3` }],
    });
    expect(count(witness, "tool:book:HF-501")).toBe(1);
    expect(count(witness, `model:${mode}:3`)).toBe(0);
    expect(intents(await eventsOf(runtime, runId))).toHaveLength(4);
    await runtime.close();
  });

  it("after a resume decision on a tool call in doubt, the model is told its outcome is unknown", async () => {
    const { runtime, witness } = await openAiRuntime(tempDir(), { mode, bookFails: "indefinite" });
    const { runId } = await submitTrip(runtime);
    const decided = await runtime.decide(runId, {
      basedOnVersion: await versionOf(runtime, runId),
      decidedBy: "ada",
      decision: "resume",
      note: "the airline does not answer; tell the customer",
    });
    expect(await decided.result).toMatchObject({
      status: "completed",
      output: { text: expect.stringMatching(/I could not book it: .*outcome of call .* is unknown/) },
    });
    expect(count(witness, "tool:book:HF-501")).toBe(1);
    expect([1, 2, 3].map((step) => count(witness, `model:${mode}:${step}`))).toEqual([1, 1, 1]);
    await runtime.close();
  });

  it("a registered secret in the prompt never reaches the journal, yet the fingerprint covers it", async () => {
    const secret = "Atlantis-7f3a9c";
    const dir = tempDir();
    const { agent, tools } = await import("../support/ai-agent.js").then((m) =>
      m.makeAiAgent({ witness: join(dir, "witness.txt"), mode }),
    );
    const runtime = await openRuntime({
      store: join(dir, "journal.db"),
      agents: [agent],
      tools: [...tools.all],
      allowlist: {},
      secrets: { DESTINATION: secret },
    });
    const { runId, result } = await submitTrip(runtime, secret);
    expect(result.status).toBe("completed");
    const stored = JSON.stringify(await eventsOf(runtime, runId));
    expect(stored).not.toContain(secret);
    expect(stored).toContain("«secret:DESTINATION»");
    await runtime.close();
  });
});

describe("holdfast/ai streams", () => {
  it("deltas reach the caller while the provider is still streaming; the outcome is committed at the end", async () => {
    const dir = tempDir();
    let sawDelta: () => void = () => undefined;
    const seen = new Promise<void>((resolve) => {
      sawDelta = resolve;
    });
    const usage = {
      inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: 1, text: 1, reasoning: 0 },
    };
    const model = new MockLanguageModelV3({
      doStream: async () => ({
        stream: new ReadableStream({
          async start(controller) {
            controller.enqueue({ type: "text-start", id: "t" });
            controller.enqueue({ type: "text-delta", id: "t", delta: "first " });
            // The provider goes on only once the caller has the first delta: held deltas would stall here.
            await Promise.race([
              seen,
              new Promise((_, reject) =>
                setTimeout(() => reject(new Error("no delta reached the caller")), 5_000),
              ),
            ]);
            controller.enqueue({ type: "text-delta", id: "t", delta: "second" });
            controller.enqueue({ type: "text-end", id: "t" });
            controller.enqueue({ type: "finish", usage, finishReason: { unified: "stop", raw: "stop" } });
            controller.close();
          },
        }),
      }),
    });
    let committedAtFirstDelta: boolean | null = null;
    let runtime: Awaited<ReturnType<typeof openRuntime>> | null = null;
    const agent = defineAgent({
      name: "streamer",
      version: "1",
      run: async (turn) => {
        const result = streamText({ model: journaledModel(turn, model), prompt: "say two words" });
        const deltas: string[] = [];
        for await (const delta of result.textStream) {
          if (deltas.length === 0) {
            const events = await runtime!.events(turn.runId);
            committedAtFirstDelta = events.some((e) => e.event.type === "call.completed");
            sawDelta();
          }
          deltas.push(delta);
        }
        return { deltas, text: await result.text };
      },
    });
    runtime = await openRuntime({ store: join(dir, "journal.db"), agents: [agent], allowlist: {} });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "streamer", content: null });
    expect(await run.result).toMatchObject({
      status: "completed",
      output: { deltas: ["first ", "second"], text: "first second" },
    });
    expect(committedAtFirstDelta).toBe(false);
    expect(await versionOf(runtime, run.runId)).toBe(4); // admitted, intended, completed, run.completed
    await runtime.close();
  });
});

describe("holdfast/ai idempotency keys", () => {
  it.each(MODES)(
    "%s: the policy's idempotencyHeader carries the call's key to the provider",
    async (mode) => {
      const usage = {
        inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
        outputTokens: { total: 1, text: 1, reasoning: 0 },
      };
      const finishReason = { unified: "stop" as const, raw: "stop" };
      const model = new MockLanguageModelV3({
        doGenerate: async () => ({
          content: [{ type: "text", text: "ok" }],
          finishReason,
          usage,
          warnings: [],
        }),
        doStream: async () => ({
          stream: new ReadableStream({
            start(controller) {
              controller.enqueue({ type: "finish", usage, finishReason });
              controller.close();
            },
          }),
        }),
      });
      const agent = defineAgent({
        name: "keyed",
        version: "1",
        run: async (turn) => {
          const journaled = journaledModel(turn, model, { idempotencyHeader: "Idempotency-Key" });
          if (mode === "generate") return (await generateText({ model: journaled, prompt: "hi" })).text;
          return streamText({ model: journaled, prompt: "hi" }).text;
        },
      });
      const runtime = await openRuntime({
        store: join(tempDir(), "journal.db"),
        agents: [agent],
        allowlist: {},
      });
      const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "keyed", content: null });
      expect((await run.result).status).toBe("completed");
      const sent = mode === "generate" ? model.doGenerateCalls : model.doStreamCalls;
      expect(sent.map((call) => call.headers?.["Idempotency-Key"])).toEqual([`${run.runId}/0#1`]);
      // The key is transport: not part of what the intent records.
      expect(JSON.stringify(await eventsOf(runtime, run.runId))).not.toContain("Idempotency-Key");
      await runtime.close();
    },
  );
});

describe("Effect Schemas for AI SDK tools", () => {
  it("show the model the JSON Schema of the encoded side and accept only input that decodes", async () => {
    const schema = effectInputSchema(Schema.Struct({ nights: Schema.NumberFromString }));
    const resolved = typeof schema === "function" ? schema() : schema;
    if (!("jsonSchema" in resolved)) throw new Error("not an AI SDK schema");
    expect(await resolved.jsonSchema).toMatchObject({
      type: "object",
      required: ["nights"],
      properties: { nights: { $ref: "#/$defs/NumberFromString" } },
    });
    // Passed on as written: the journaled call decodes it once.
    expect(await resolved.validate?.({ nights: "3" })).toEqual({ success: true, value: { nights: "3" } });
    expect(await resolved.validate?.({ nights: 3 })).toMatchObject({ success: false });
  });
});
