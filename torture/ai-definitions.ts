/**
 * The torture's AI SDK agent (`npm run torture -- --agent ai`): `generateText` or `streamText` with a
 * multi-step tool loop, the model and the tools through `holdfast/ai`. The provider is the AI SDK's
 * offline model, scripted by the prompt; it is an effect like any other: every request it receives
 * leaves a line with the call's idempotency key (sent by the middleware's `idempotencyHeader`) in
 * `witness/model.txt`, so a model call asked twice for one attempt is a duplicate. The tools are the
 * classic agent's `read_safe` (on the safe list) and `send` (held when in doubt).
 *
 * The conversation: the model asks for `read_safe` and `send` together (parallel tool calls), then
 * for a second `send`, then answers in text.
 */
import { createHash } from "node:crypto";
import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { generateText, type LanguageModelMiddleware, stepCountIs, streamText } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Schema } from "effect";
import { journaledModel, journaledTools } from "../src/ai.js";
import { defineAgent, defineTool } from "../src/index.js";

type CallOptions = Parameters<NonNullable<LanguageModelMiddleware["wrapGenerate"]>>[0]["params"];

export interface AiTortureSetting {
  /** The trial's folder: `witness/` lives in it. */
  readonly dir: string;
  readonly mode: "generate" | "stream";
  /** The model's policy for a call in doubt. */
  readonly inDoubt: "hold" | "replay";
  /**
   * The `ai-stream` variant: some streamed answers break off with an in-band error part and a
   * finish whose reason is `error`, as a provider reports an overload mid-stream ({@link inBandError}).
   */
  readonly inBandErrors?: boolean;
}

/**
 * Whether the request of this attempt breaks off with an in-band error: a third of them, chosen by
 * the idempotency key so every process (and the harness deciding afterwards) agrees.
 */
export const inBandError = (idempotencyKey: string): boolean =>
  (createHash("sha256").update(idempotencyKey).digest()[0] ?? 0) % 3 === 0;

/** The model calls' name in the journal (and for HOLDFAST_CRASH_CALL). */
export const AI_MODEL_NAME = "torture-model";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

const answer = (params: CallOptions) => {
  const results = params.prompt.flatMap((m) => (m.role === "tool" ? m.content : []));
  const user = params.prompt.find((m) => m.role === "user")?.content[0];
  const label = user?.type === "text" ? user.text : "?";
  if (results.length === 0)
    return {
      step: 1,
      text: `Reading and sending for ${label}.`,
      calls: [
        { name: "read_safe", input: { label: `${label}-read` } },
        { name: "send", input: { label: `${label}-send-1` } },
      ],
    };
  if (results.length === 2)
    return { step: 2, text: "One more.", calls: [{ name: "send", input: { label: `${label}-send-2` } }] };
  return { step: 3, text: `Done for ${label}.`, calls: [] };
};

export const makeAiTortureDefinitions = ({ dir, mode, inDoubt, inBandErrors = false }: AiTortureSetting) => {
  const witness = (name: string) => join(dir, "witness", name);
  const ask = (params: CallOptions) => {
    const a = answer(params);
    appendFileSync(witness("model.txt"), `${a.step} ${params.headers?.["Idempotency-Key"] ?? "no-key"}\n`);
    return a;
  };
  const toolCalls = (a: ReturnType<typeof answer>) =>
    a.calls.map((c, i) => ({
      type: "tool-call" as const,
      toolCallId: `call-${a.step}-${i}`,
      toolName: c.name,
      input: JSON.stringify(c.input),
    }));
  const finishReason = (a: ReturnType<typeof answer>) =>
    a.calls.length > 0
      ? { unified: "tool-calls" as const, raw: "tool_calls" }
      : { unified: "stop" as const, raw: "stop" };
  const provider = new MockLanguageModelV3({
    doGenerate: async (params) => {
      const a = ask(params);
      return {
        content: [{ type: "text", text: a.text }, ...toolCalls(a)],
        finishReason: finishReason(a),
        usage,
        warnings: [],
        response: { id: `r${a.step}`, timestamp: new Date(Date.UTC(2026, 0, a.step)), modelId: "mock" },
      };
    },
    doStream: async (params) => {
      const a = ask(params);
      const key = params.headers?.["Idempotency-Key"] ?? "no-key";
      const broken = inBandErrors && inBandError(key);
      const parts = broken
        ? [
            { type: "stream-start" as const, warnings: [] },
            { type: "text-start" as const, id: "t" },
            { type: "text-delta" as const, id: "t", delta: a.text.split(" ")[0] ?? "" },
            { type: "error" as const, error: { type: "overloaded_error", message: "Overloaded" } },
            { type: "finish" as const, usage, finishReason: { unified: "error" as const, raw: "error" } },
          ]
        : [
            { type: "stream-start" as const, warnings: [] },
            { type: "text-start" as const, id: "t" },
            ...a.text
              .split(" ")
              .map((word, i) => ({ type: "text-delta" as const, id: "t", delta: i ? ` ${word}` : word })),
            { type: "text-end" as const, id: "t" },
            ...toolCalls(a),
            { type: "finish" as const, usage, finishReason: finishReason(a) },
          ];
      return {
        stream: new ReadableStream({
          async pull(controller) {
            const part = parts.shift();
            if (!part) return controller.close();
            // A little time between parts, so random kills also land inside a stream.
            await new Promise((resolve) => setTimeout(resolve, 5));
            controller.enqueue(part);
          },
        }),
      };
    },
  });

  const send = defineTool({
    name: "send",
    description: "Send a message",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }, { idempotencyKey }) => {
      appendFileSync(witness("send.txt"), `${label} ${idempotencyKey}\n`);
      return { sent: label };
    },
  });
  const readSafe = defineTool({
    name: "read_safe",
    description: "Read something (no effect outside)",
    args: Schema.Struct({ label: Schema.String }),
    disposition: "replay",
    run: async ({ label }, { idempotencyKey }) => {
      appendFileSync(witness("read.txt"), `${label} ${idempotencyKey}\n`);
      return { read: label };
    },
  });

  const agent = defineAgent({
    name: "torture",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const model = journaledModel(turn, provider, {
        name: AI_MODEL_NAME,
        inDoubt,
        idempotencyHeader: "Idempotency-Key",
      });
      const tools = journaledTools(turn, [readSafe, send]);
      const request = { model, tools, stopWhen: stepCountIs(5), prompt: input.label };
      if (mode === "stream") {
        const result = streamText(request);
        let text = "";
        for await (const delta of result.textStream) text += delta;
        return { text, steps: (await result.steps).length };
      }
      const result = await generateText(request);
      return { text: result.text, steps: result.steps.length };
    },
  });

  return { agents: [agent], tools: [send, readSafe], allowlist: { read_safe: readSafe.pin } };
};
