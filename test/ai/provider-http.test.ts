import { join } from "node:path";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";
import { describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { runView } from "../../src/adapters/surfaces/http/views.js";
import { journaledModel, type ModelPolicy } from "../../src/ai.js";
import type { AnyEvent, EventOf } from "../../src/events/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { type ScriptedAnswer, scriptedServer } from "../support/scripted-server.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const fast = { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 };

const ofType = <T extends AnyEvent["type"]>(events: ReadonlyArray<AnyEvent>, type: T) =>
  events.filter((e): e is EventOf<T> => e.type === type);

/** What an OpenAI-compatible provider answers to a chat completion. */
const completion = (text: string): ScriptedAnswer => ({
  status: 200,
  body: {
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "local-model",
    choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  },
});

/** A chat completion streamed as Server-Sent Events, in two text deltas. */
const streamed = (first: string, second: string): ScriptedAnswer => {
  const chunk = (delta: unknown, finish: string | null) =>
    `data: ${JSON.stringify({
      id: "chatcmpl-2",
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model: "local-model",
      choices: [{ index: 0, delta, finish_reason: finish }],
    })}\n\n`;
  return {
    status: 200,
    headers: { "content-type": "text/event-stream" },
    raw: `${chunk({ role: "assistant", content: first }, null)}${chunk({ content: second }, "stop")}data: [DONE]\n\n`,
  };
};

/** A provider's error answer, with the body OpenAI-compatible APIs send. */
const refusal = (status: number, headers: Record<string, string> = {}): ScriptedAnswer => ({
  status,
  headers,
  body: { error: { message: `the provider answered ${status}`, type: "error", code: String(status) } },
});

/**
 * One run whose agent asks the model at `server` once through the real OpenAI-compatible provider
 * and `generateText`, with the SDK's default `maxRetries` (2) unless `sdk` says otherwise.
 */
const ask = async (
  url: string,
  policy: ModelPolicy,
  sdk: { maxRetries?: number } = {},
  mode: "generate" | "stream" = "generate",
) => {
  const provider = createOpenAICompatible({ name: "local", baseURL: `${url}/v1`, apiKey: "test-key" });
  const store = join(tempDir(), "j.db");
  const runtime = await openRuntime({
    store,
    agents: [
      defineAgent({
        name: "asker",
        version: "1",
        run: async (turn) => {
          const model = journaledModel(turn, provider.chatModel("local-model"), policy);
          try {
            if (mode === "stream") {
              const result = streamText({ model, prompt: "hi", ...sdk });
              return await result.text;
            }
            const { text } = await generateText({ model, prompt: "hi", ...sdk });
            return text;
          } catch (error) {
            return { threw: (error as { _tag?: string })._tag ?? (error as Error).name };
          }
        },
      }),
    ],
    tools: [],
  });
  try {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: {} });
    const result = await handle.result;
    const recorded = await runtime.events(handle.runId);
    return {
      store,
      runId: handle.runId,
      result,
      recorded,
      events: recorded.map((e) => e.event),
      audit: await runtime.audit(),
    };
  } finally {
    await runtime.close();
  }
};

describe("an AI SDK provider pointed at a real local server, through journaledModel with a retry policy", () => {
  it("a 429 with Retry-After: 2 then a 200 completes with 2 attempts recorded; the next attempt is due 2 s after the failure", async () => {
    const server = await scriptedServer([refusal(429, { "retry-after": "2" })], () => completion("hello"));
    try {
      const { result, recorded, events, audit } = await ask(server.url, {
        retry: { attempts: 3, backoff: fast },
      });
      expect(result).toMatchObject({ status: "completed", output: "hello" });
      expect(server.received()).toHaveLength(2);
      expect(
        events.filter((e) => e.type.startsWith("call.") || e.type === "retry.scheduled").map((e) => e.type),
      ).toEqual(["call.intended", "call.failed", "retry.scheduled", "call.intended", "call.completed"]);
      expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2]);
      expect(ofType(events, "call.failed")[0]).toMatchObject({
        definite: true,
        error: { details: { statusCode: 429, isRetryable: true, retryAfter: "2" } },
      });
      const [scheduled] = ofType(events, "retry.scheduled");
      expect(scheduled).toMatchObject({ attempt: 2, reason: "retry-after" });
      expect(scheduled!.delayMs).toBeGreaterThanOrEqual(2000);
      const failedAt = recorded.find((e) => e.event.type === "call.failed")!.recordedAt;
      expect(Date.parse(scheduled!.dueAt) - Date.parse(failedAt)).toBeGreaterThanOrEqual(2000);
      expect(server.received()[1]!.at).toBeGreaterThanOrEqual(Date.parse(scheduled!.dueAt));
      expect(audit.findings).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it("streamText: a 429 before the stream opens is retried the same way; the second attempt's stream is the answer", async () => {
    const server = await scriptedServer([refusal(429, { "retry-after": "1" })], () => streamed("hel", "lo"));
    try {
      const { result, events, audit } = await ask(
        server.url,
        { retry: { attempts: 3, backoff: fast } },
        { maxRetries: 0 },
        "stream",
      );
      expect(result).toMatchObject({ status: "completed", output: "hello" });
      expect(server.received()).toHaveLength(2);
      expect(
        events.filter((e) => e.type.startsWith("call.") || e.type === "retry.scheduled").map((e) => e.type),
      ).toEqual(["call.intended", "call.failed", "retry.scheduled", "call.intended", "call.completed"]);
      expect(ofType(events, "retry.scheduled")[0]).toMatchObject({ reason: "retry-after", delayMs: 1000 });
      expect(audit.findings).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it("a retry-after-ms header (as OpenAI and Anthropic send it) is honoured to the millisecond", async () => {
    const server = await scriptedServer([refusal(429, { "retry-after-ms": "1500" })], () =>
      completion("hello"),
    );
    try {
      const { result, events } = await ask(server.url, { retry: { attempts: 2, backoff: fast } });
      expect(result).toMatchObject({ status: "completed", output: "hello" });
      expect(ofType(events, "call.failed")[0]?.error.details).toMatchObject({ retryAfterMs: "1500" });
      expect(ofType(events, "retry.scheduled")).toEqual([
        expect.objectContaining({ attempt: 2, reason: "retry-after", delayMs: 1500 }),
      ]);
    } finally {
      await server.close();
    }
  });

  it.each([408, 409, 503, 529])(
    "a %i says the provider did not do the request: a definite failure, retried by the default policy",
    async (status) => {
      const server = await scriptedServer([refusal(status)], () => completion("hello"));
      try {
        const { result, events, audit } = await ask(server.url, { retry: { attempts: 2, backoff: fast } });
        expect(result).toMatchObject({ status: "completed", output: "hello" });
        expect(server.received()).toHaveLength(2);
        expect(ofType(events, "call.failed")).toEqual([
          expect.objectContaining({
            definite: true,
            error: expect.objectContaining({ details: expect.objectContaining({ statusCode: status }) }),
          }),
        ]);
        expect(ofType(events, "retry.scheduled").map((s) => [s.attempt, s.reason])).toEqual([[2, "backoff"]]);
        expect(audit.findings).toEqual([]);
      } finally {
        await server.close();
      }
    },
  );

  it.each([500, 502, 504])(
    'a %i may come after the provider acted: with inDoubt: "hold" the run is held and the provider asked once',
    async (status) => {
      const server = await scriptedServer([refusal(status)], () => completion("hello"));
      try {
        const { result, events } = await ask(server.url, {
          inDoubt: "hold",
          retry: { attempts: 3, backoff: fast },
        });
        expect(result).toMatchObject({
          status: "held",
          reasons: [{ code: "indefinite-failure", detail: expect.stringContaining(String(status)) }],
        });
        expect(server.received()).toHaveLength(1);
        expect(ofType(events, "call.failed")).toEqual([]);
        expect(ofType(events, "retry.scheduled")).toEqual([]);
      } finally {
        await server.close();
      }
    },
  );

  it.each([
    ["an Envoy page", { "content-type": "text/plain" }],
    ["an Envoy page with JSON content-type", {}],
  ])(
    "a 503 that is a gateway's page (%s), not the provider's error, is in doubt: with inDoubt: \"hold\" the run is held",
    async (_, headers) => {
      const envoy =
        "upstream connect error or disconnect/reset before headers. reset reason: connection termination";
      const server = await scriptedServer([{ status: 503, headers, raw: envoy }], () => completion("hello"));
      try {
        const { result, events } = await ask(server.url, {
          inDoubt: "hold",
          retry: { attempts: 3, backoff: fast },
        });
        expect(result).toMatchObject({
          status: "held",
          reasons: [{ code: "indefinite-failure", detail: expect.stringContaining("Service Unavailable") }],
        });
        expect(server.received()).toHaveLength(1);
        expect(ofType(events, "call.failed")).toEqual([]);
      } finally {
        await server.close();
      }
    },
  );

  it('a 503 page with a retry-after is the provider\'s "come back later": definite, retried', async () => {
    const server = await scriptedServer(
      [{ status: 503, headers: { "content-type": "text/plain", "retry-after": "0" }, raw: "unavailable" }],
      () => completion("hello"),
    );
    try {
      const { result, events } = await ask(server.url, {
        inDoubt: "hold",
        retry: { attempts: 2, backoff: fast },
      });
      expect(result).toMatchObject({ status: "completed", output: "hello" });
      expect(ofType(events, "call.failed")).toEqual([expect.objectContaining({ definite: true })]);
    } finally {
      await server.close();
    }
  });

  it('a 502 with inDoubt: "replay" is retried by the policy: the attempt stays in doubt, the next one answers', async () => {
    const server = await scriptedServer([refusal(502)], () => completion("hello"));
    try {
      const { store, runId, result, events, audit } = await ask(server.url, {
        inDoubt: "replay",
        retry: { attempts: 2, backoff: fast },
      });
      expect(result).toMatchObject({ status: "completed", output: "hello" });
      expect(server.received()).toHaveLength(2);
      expect(ofType(events, "call.failed")).toEqual([]);
      const scheduled = ofType(events, "retry.scheduled");
      expect(scheduled.map((s) => s.attempt)).toEqual([2]);
      // The attempt left in doubt has no call.failed: its error is kept with the retry.
      expect(scheduled[0]!.error).toMatchObject({
        name: "AI_APICallError",
        message: expect.stringContaining("502"),
      });
      expect(audit.findings).toEqual([]);
      const reader = await openStore(store);
      try {
        const [call] = (await runView(reader, runId)).calls;
        expect(call).toMatchObject({
          attempt: 2,
          status: "completed",
          failedAttempts: [
            { attempt: 1, definite: false, name: "AI_APICallError", message: expect.stringContaining("502") },
          ],
        });
      } finally {
        await reader.close();
      }
    } finally {
      await server.close();
    }
  });

  it("the SDK's own maxRetries never reaches the provider: only the policy's attempts are sent, each journaled", async () => {
    const server = await scriptedServer([], () => refusal(429));
    try {
      const { result, events } = await ask(
        server.url,
        { retry: { attempts: 2, backoff: fast } },
        { maxRetries: 5 },
      );
      expect(result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
      expect(server.received()).toHaveLength(2);
      expect(ofType(events, "call.intended")).toHaveLength(2);
    } finally {
      await server.close();
    }
  });
});
