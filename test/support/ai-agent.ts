/**
 * An AI SDK agent for the `holdfast/ai` tests: `generateText` or `streamText` with a multi-step tool
 * loop on the AI SDK's own offline model (`MockLanguageModelV3`). The model is scripted by the
 * prompt it receives, not by a counter, so it answers the same in every process; every time the
 * provider is really asked, and every time a tool really runs, a line goes to the outside witness.
 *
 * The conversation: the model asks for `lookup` of the city (and, `parallel`, `lookup` of a second
 * city in the same response); then for `book` of the first flight found; then it answers in text.
 */
import { appendFileSync } from "node:fs";
import { generateText, jsonSchema, type LanguageModelMiddleware, stepCountIs, streamText, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Schema } from "effect";
import { fromAiTool, journaledModel, journaledTools, type ModelPolicy } from "../../src/ai.js";
import { DefiniteFailure, defineAgent, defineTool } from "../../src/index.js";

type CallOptions = Parameters<NonNullable<LanguageModelMiddleware["wrapGenerate"]>>[0]["params"];

export interface AiSetupOptions {
  readonly witness: string;
  readonly mode?: "generate" | "stream";
  readonly policy?: ModelPolicy;
  /** The model asks for two lookups in one response. */
  readonly parallel?: boolean;
  /** Milliseconds the `lookup` tool takes, per city (parallel calls finishing out of order). */
  readonly lookupMs?: Readonly<Record<string, number>>;
  /** How `book` fails: definitely (`DefiniteFailure`), or without proof (a reset connection). */
  readonly bookFails?: "definite" | "indefinite";
  /** `book` asks for a person's approval (the AI SDK's `needsApproval: true`). */
  readonly bookNeedsApproval?: boolean;
  /** How the provider fails on a given step (1-based), before it answers. */
  readonly failStep?: { readonly step: number; readonly error: () => unknown; readonly times: number };
}

export const MODEL_NAME = "mock-provider/mock-model-id";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** What the provider answers at this point of the conversation (how many tool results it has seen). */
const script = (options: CallOptions, parallel: boolean) => {
  const results = options.prompt.flatMap((m) =>
    m.role === "tool" ? m.content.filter((p) => p.type === "tool-result") : [],
  );
  const city = (() => {
    const user = options.prompt.find((m) => m.role === "user");
    const text = user?.content.find((p) => p.type === "text");
    return text?.type === "text" ? text.text.replace(/^fly to /, "") : "nowhere";
  })();
  const step = results.length === 0 ? 1 : results.some((r) => r.toolName === "book") ? 3 : 2;
  if (step === 1) {
    const calls = [
      { id: "call-lookup-1", city },
      ...(parallel ? [{ id: "call-lookup-2", city: "Oslo" }] : []),
    ];
    return {
      step,
      text: `Looking up flights to ${city}.`,
      toolCalls: calls.map((c) => ({ id: c.id, name: "lookup", input: { city: c.city } })),
    };
  }
  if (step === 2) {
    const lookup = results.find((r) => r.toolName === "lookup");
    const flight =
      lookup?.output.type === "json" ? (lookup.output.value as { flights: string[] }).flights[0] : "none";
    return {
      step,
      text: `Booking ${flight}.`,
      toolCalls: [{ id: "call-book-1", name: "book", input: { flight } }],
    };
  }
  const booked = results.find((r) => r.toolName === "book")?.output;
  if (booked?.type === "error-text" || booked?.type === "error-json")
    return { step, text: `I could not book it: ${JSON.stringify(booked.value)}`, toolCalls: [] };
  return { step, text: `Booked your flight to ${city}. Have a good trip!`, toolCalls: [] };
};

export const makeAiModel = (options: AiSetupOptions): MockLanguageModelV3 => {
  const failures = new Map<number, number>();
  const ask = (kind: "generate" | "stream", params: CallOptions) => {
    const answer = script(params, options.parallel ?? false);
    appendFileSync(options.witness, `model:${kind}:${answer.step}\n`);
    const fail = options.failStep;
    if (fail && fail.step === answer.step && (failures.get(answer.step) ?? 0) < fail.times) {
      failures.set(answer.step, (failures.get(answer.step) ?? 0) + 1);
      throw fail.error();
    }
    return answer;
  };
  const finishReason = (calls: number) =>
    calls > 0
      ? { unified: "tool-calls" as const, raw: "tool_calls" }
      : { unified: "stop" as const, raw: "stop" };
  return new MockLanguageModelV3({
    doGenerate: async (params) => {
      const answer = ask("generate", params);
      return {
        content: [
          { type: "text", text: answer.text },
          ...answer.toolCalls.map((c) => ({
            type: "tool-call" as const,
            toolCallId: c.id,
            toolName: c.name,
            input: JSON.stringify(c.input),
          })),
        ],
        finishReason: finishReason(answer.toolCalls.length),
        usage,
        warnings: [],
        request: { body: { secret: "raw request body" } },
        response: {
          id: `response-${answer.step}`,
          timestamp: new Date(Date.UTC(2026, 0, answer.step)),
          modelId: "mock-model-id",
          body: { raw: "raw response body" },
        },
      };
    },
    doStream: async (params) => {
      const answer = ask("stream", params);
      const words = answer.text.split(/(?<= )/);
      const parts = [
        { type: "stream-start" as const, warnings: [] },
        {
          type: "response-metadata" as const,
          id: `response-${answer.step}`,
          timestamp: new Date(Date.UTC(2026, 0, answer.step)),
          modelId: "mock-model-id",
        },
        { type: "text-start" as const, id: "t" },
        ...words.map((delta) => ({ type: "text-delta" as const, id: "t", delta })),
        { type: "text-end" as const, id: "t" },
        ...answer.toolCalls.map((c) => ({
          type: "tool-call" as const,
          toolCallId: c.id,
          toolName: c.name,
          input: JSON.stringify(c.input),
        })),
        { type: "finish" as const, usage, finishReason: finishReason(answer.toolCalls.length) },
      ];
      return {
        stream: new ReadableStream({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  });
};

export const makeAiTools = (options: AiSetupOptions) => {
  const lookup = defineTool({
    name: "lookup",
    description: "Flights to a city",
    args: Schema.Struct({ city: Schema.String }),
    disposition: "replay",
    run: async ({ city }) => {
      const ms = options.lookupMs?.[city] ?? 0;
      if (ms > 0) await new Promise((r) => setTimeout(r, ms));
      appendFileSync(options.witness, `tool:lookup:${city}\n`);
      return { city, flights: [`HF-${city.length}01`, `HF-${city.length}02`] };
    },
  });
  // An AI SDK tool, as people write them: a side effect nothing can prove (disposition hold).
  const book = fromAiTool(
    "book",
    tool({
      description: "Book a flight",
      inputSchema: jsonSchema<{ flight: string }>({
        type: "object",
        properties: { flight: { type: "string" } },
        required: ["flight"],
        additionalProperties: false,
      }),
      ...(options.bookNeedsApproval ? { needsApproval: true } : {}),
      execute: async ({ flight }, { toolCallId }) => {
        appendFileSync(options.witness, `tool:book:${flight}\n`);
        if (options.bookFails === "definite") throw new DefiniteFailure(`no seats left on ${flight}`);
        if (options.bookFails === "indefinite") throw new Error("socket hang up");
        return { booked: flight, confirmation: `CONF-${flight}`, toolCallId };
      },
    }),
  );
  return { lookup, book, all: [lookup, book] as const };
};

export const makeAiAgent = (options: AiSetupOptions) => {
  const model = makeAiModel(options);
  const tools = makeAiTools(options);
  const agent = defineAgent({
    name: "travel",
    version: "1",
    run: async (turn, input: { city: string }) => {
      const journaled = journaledModel(turn, model, options.policy ?? {});
      const toolSet = journaledTools(turn, tools.all);
      const request = {
        model: journaled,
        tools: toolSet,
        stopWhen: stepCountIs(5),
        prompt: `fly to ${input.city}`,
      };
      if (options.mode === "stream") {
        const result = streamText(request);
        let deltas = 0;
        for await (const _ of result.textStream) deltas++;
        const steps = await result.steps;
        return {
          text: await result.text,
          deltas,
          steps: steps.length,
          timestamps: steps.map((s) => s.response.timestamp.toISOString()),
        };
      }
      const result = await generateText(request);
      return {
        text: result.text,
        steps: result.steps.length,
        timestamps: result.steps.map((s) => s.response.timestamp.toISOString()),
        toolResults: result.steps.flatMap((s) => s.toolResults.map((r) => r.output)),
      };
    },
  });
  return { agent, model, tools };
};
