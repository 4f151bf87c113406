import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { APICallError, generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import {
  effectInputSchema,
  fromAiTool,
  journaledModel,
  journaledTools,
  type ModelPolicy,
} from "../../src/ai.js";
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

describe("holdfast/ai streams, masked and whole", () => {
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 1, text: 1, reasoning: 0 },
  };
  type Part = Record<string, unknown>;
  const streaming = (parts: ReadonlyArray<Part>) =>
    new MockLanguageModelV3({
      doStream: async () => ({
        stream: new ReadableStream({
          start(controller) {
            for (const part of parts) controller.enqueue(part as never);
            controller.close();
          },
        }),
      }),
    });
  const streamingAgent = (model: MockLanguageModelV3, policy: ModelPolicy = {}) =>
    defineAgent({
      name: "streamer",
      version: "1",
      run: async (turn) => {
        const result = streamText({
          model: journaledModel(turn, model, policy),
          prompt: "hi",
          onError: () => {},
        });
        const got: string[] = [];
        for await (const delta of result.textStream) got.push(delta);
        return { got };
      },
    });
  const runOnce = async (model: MockLanguageModelV3, policy: ModelPolicy = {}) => {
    const runtime = await openRuntime({
      store: join(tempDir(), "journal.db"),
      agents: [streamingAgent(model, policy)],
      allowlist: {},
    });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "streamer", content: null });
    return { runtime, runId: run.runId, result: await run.result };
  };
  const KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345";

  it("R4: a token shape in a streamed answer does not make the re-execution a determinism hold", async () => {
    let bookRuns = 0;
    const step = (prompt: ReadonlyArray<{ role: string }>) =>
      prompt.filter((m) => m.role === "tool").length + 1;
    // The key reaches the caller cut in two deltas: masking each alone would miss it.
    const answer = (s: number): Part[] =>
      s === 1
        ? [
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: `Your new key is ${KEY.slice(0, 12)}` },
            { type: "text-delta", id: "t", delta: `${KEY.slice(12)}. Booking now.` },
            { type: "text-end", id: "t" },
            { type: "tool-call", toolCallId: "c1", toolName: "lookup", input: '{"what":"flight"}' },
          ]
        : s === 2
          ? [{ type: "tool-call", toolCallId: "c2", toolName: "book", input: '{"what":"hotel"}' }]
          : [
              { type: "text-start", id: "t" },
              { type: "text-delta", id: "t", delta: "done" },
              { type: "text-end", id: "t" },
            ];
    const model = new MockLanguageModelV3({
      doStream: async ({ prompt }) => {
        const s = step(prompt);
        return {
          stream: new ReadableStream({
            start(controller) {
              for (const part of answer(s)) controller.enqueue(part as never);
              controller.enqueue({
                type: "finish",
                usage,
                finishReason: { unified: s < 3 ? "tool-calls" : "stop", raw: "x" },
              });
              controller.close();
            },
          }),
        };
      },
    });
    const schema = jsonSchema<{ what: string }>({ type: "object", properties: { what: { type: "string" } } });
    const lookup = fromAiTool("lookup", tool({ inputSchema: schema, execute: async () => ({ found: 1 }) }));
    const book = fromAiTool(
      "book",
      tool({
        inputSchema: schema,
        execute: async () => {
          bookRuns++;
          if (bookRuns === 1) throw new Error("ECONNRESET");
          return { ok: true };
        },
      }),
    );
    const seen: string[] = [];
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        const result = streamText({
          model: journaledModel(turn, model),
          tools: journaledTools(turn, [lookup, book]),
          stopWhen: stepCountIs(3),
          prompt: "go",
        });
        let first = "";
        for await (const part of result.fullStream) {
          if (part.type === "finish-step") break;
          if (part.type === "text-delta") first += part.text;
        }
        seen.push(first);
        return await result.text;
      },
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "journal.db"),
      agents: [agent],
      tools: [lookup, book],
      allowlist: {},
    });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: null });
    expect(await run.result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
    const decided = await runtime.decide(run.runId, {
      basedOnVersion: await versionOf(runtime, run.runId),
      decidedBy: "rev",
      decision: "confirmed-not-completed",
      note: "not booked",
    });
    expect(await decided.result).toMatchObject({ status: "completed", output: "done" });
    expect((await eventsOf(runtime, run.runId)).filter((e) => e.type === "conflict.recorded")).toEqual([]);
    // Live and re-executed, the caller saw the same masked text.
    expect(seen).toEqual([
      "Your new key is «secret:api-key». Booking now.",
      "Your new key is «secret:api-key». Booking now.",
    ]);
    await runtime.close();
  });

  it("R5: an error part in the stream leaves the model call in doubt: the run is held, no outcome recorded", async () => {
    const model = streaming([
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "hello " },
      { type: "error", error: new Error("server overloaded mid-stream") },
      { type: "finish", usage, finishReason: { unified: "error", raw: "error" } },
    ]);
    const { runtime, runId, result } = await runOnce(model);
    expect(result).toMatchObject({
      status: "held",
      reasons: [{ code: "indefinite-failure", callId: `${runId}/0` }],
    });
    expect(JSON.stringify(result)).toContain("server overloaded mid-stream");
    expect(outcomes(await eventsOf(runtime, runId))).toEqual([]);
    await runtime.close();
  });

  it("R5: a finish with reason error and no error part leaves the model call in doubt too", async () => {
    const model = streaming([
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "hello" },
      { type: "finish", usage, finishReason: { unified: "error", raw: "overloaded" } },
    ]);
    const { runtime, runId, result } = await runOnce(model);
    expect(result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
    expect(JSON.stringify(result)).toContain("overloaded");
    expect(outcomes(await eventsOf(runtime, runId))).toEqual([]);
    await runtime.close();
  });

  it("R5: an error part the policy's definite classifier says proves a refusal is a definite failure", async () => {
    const model = streaming([
      {
        type: "error",
        error: new APICallError({
          message: "rate limited",
          url: "u",
          requestBodyValues: {},
          statusCode: 429,
        }),
      },
      { type: "finish", usage, finishReason: { unified: "error", raw: "error" } },
    ]);
    const { runtime, runId } = await runOnce(model);
    const events = await eventsOf(runtime, runId);
    expect(events).toContainEqual(
      expect.objectContaining({ type: "call.failed", callId: `${runId}/0`, definite: true }),
    );
    expect(outcomes(events)).toEqual([]);
    await runtime.close();
  });

  it("a stream that ends without a finish part is cut short: the model call stays in doubt", async () => {
    const model = streaming([
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "hel" },
    ]);
    const { runtime, runId, result } = await runOnce(model);
    expect(result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
    expect(outcomes(await eventsOf(runtime, runId))).toEqual([]);
    await runtime.close();
  });

  it("a secret that only shows once later text arrives is never stored: the call is left in doubt", async () => {
    const model = streaming([
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: 'the config says password="open ' },
      { type: "text-delta", id: "t", delta: 'sesame" and more' },
      { type: "text-end", id: "t" },
      { type: "finish", usage, finishReason: { unified: "stop", raw: "stop" } },
    ]);
    const { runtime, runId, result } = await runOnce(model);
    expect(result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
    expect(JSON.stringify(result)).toContain("StreamMaskDiverged");
    expect(JSON.stringify(await eventsOf(runtime, runId))).not.toContain("sesame");
    await runtime.close();
  });
});

describe.each(MODES)("holdfast/ai tool-call input, %s", (mode) => {
  const usage = {
    inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 1, text: 1, reasoning: 0 },
  };
  const PASSWORD = "hunter2xyz";
  const REGISTERED = "k3y-Registered-Tool-5c4b3a";
  /** Every byte the journal left in the folder: the database and its WAL. */
  const rawBytes = (dir: string): Buffer =>
    Buffer.concat(
      readdirSync(dir)
        .filter((f) => f.startsWith("journal.db"))
        .map((f) => readFileSync(join(dir, f))),
    );
  const has = (bytes: Buffer, text: string): boolean => bytes.includes(Buffer.from(text, "utf8"));

  it("tool-input mask: a password in a model's tool-call input never reaches the journal, and a re-execution after a decision is no determinism hold", async () => {
    const dir = tempDir();
    const input = JSON.stringify({ user: "ada", password: PASSWORD, note: `use ${REGISTERED}` });
    const step = (prompt: ReadonlyArray<{ role: string }>) =>
      prompt.filter((m) => m.role === "tool").length + 1;
    const call = (s: number) =>
      s === 1
        ? { toolCallId: "c1", toolName: "login", input }
        : { toolCallId: "c2", toolName: "book", input: '{"what":"hotel"}' };
    const finishReason = (s: number) => ({
      unified: s < 3 ? ("tool-calls" as const) : ("stop" as const),
      raw: "x",
    });
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) => {
        const s = step(prompt);
        return {
          content: s < 3 ? [{ type: "tool-call", ...call(s) }] : [{ type: "text", text: "done" }],
          finishReason: finishReason(s),
          usage,
          warnings: [],
        };
      },
      doStream: async ({ prompt }) => {
        const s = step(prompt);
        const { toolCallId, toolName, input: text } = call(s);
        // The input streams cut inside the password, as providers send it.
        const parts =
          s < 3
            ? [
                { type: "tool-input-start", id: toolCallId, toolName },
                { type: "tool-input-delta", id: toolCallId, delta: text.slice(0, 30) },
                { type: "tool-input-delta", id: toolCallId, delta: text.slice(30) },
                { type: "tool-input-end", id: toolCallId },
                { type: "tool-call", toolCallId, toolName, input: text },
              ]
            : [
                { type: "text-start", id: "t" },
                { type: "text-delta", id: "t", delta: "done" },
                { type: "text-end", id: "t" },
              ];
        return {
          stream: new ReadableStream({
            start(controller) {
              for (const part of parts) controller.enqueue(part as never);
              controller.enqueue({ type: "finish", usage, finishReason: finishReason(s) });
              controller.close();
            },
          }),
        };
      },
    });
    const received: unknown[] = [];
    const login = fromAiTool(
      "login",
      tool({
        inputSchema: jsonSchema<Record<string, string>>({ type: "object" }),
        execute: async (args) => {
          received.push(args);
          return { session: "s-1" };
        },
      }),
    );
    let bookRuns = 0;
    const book = fromAiTool(
      "book",
      tool({
        inputSchema: jsonSchema<{ what: string }>({ type: "object" }),
        execute: async () => {
          bookRuns++;
          if (bookRuns === 1) throw new Error("ECONNRESET");
          return { ok: true };
        },
      }),
    );
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => {
        const request = {
          model: journaledModel(turn, model),
          tools: journaledTools(turn, [login, book]),
          stopWhen: stepCountIs(3),
          prompt: "go",
        };
        if (mode === "generate") return (await generateText(request)).text;
        return await streamText(request).text;
      },
    });
    const runtime = await openRuntime({
      store: join(dir, "journal.db"),
      agents: [agent],
      tools: [login, book],
      allowlist: {},
      secrets: { TOOL_KEY: REGISTERED },
    });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "a", content: null });
    expect(await run.result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
    const decided = await runtime.decide(run.runId, {
      basedOnVersion: await versionOf(runtime, run.runId),
      decidedBy: "rev",
      decision: "confirmed-not-completed",
      note: "not booked",
    });
    expect(await decided.result).toMatchObject({ status: "completed", output: "done" });
    const events = await eventsOf(runtime, run.runId);
    expect(events.filter((e) => e.type === "conflict.recorded")).toEqual([]);
    const stored = JSON.stringify(outcomes(events)[0]?.result);
    expect(stored).toContain("«secret:password»");
    expect(stored).not.toContain(PASSWORD);
    const whileOpen = rawBytes(dir);
    expect(readdirSync(dir)).toContain("journal.db-wal");
    // The masked form is there: the scan reads the right bytes.
    expect(has(whileOpen, "«secret:password»")).toBe(true);
    for (const secret of [PASSWORD, REGISTERED]) expect(has(whileOpen, secret)).toBe(false);
    // The tool got what the journal keeps (decision 0036), once: the re-execution was answered.
    expect(received).toEqual([{ user: "ada", password: "«secret:password»", note: "use «secret:TOOL_KEY»" }]);
    await runtime.close();
    for (const secret of [PASSWORD, REGISTERED]) expect(has(rawBytes(dir), secret)).toBe(false);
  });
});
