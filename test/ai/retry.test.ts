import { join } from "node:path";
import { APICallError, generateText } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { journaledModel, type ModelPolicy } from "../../src/ai.js";
import type { AnyEvent, EventOf } from "../../src/events/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const answer = (text: string) => ({
  content: [{ type: "text" as const, text }],
  finishReason: { unified: "stop" as const, raw: "stop" },
  usage,
  warnings: [],
});
const apiError = (statusCode: number, headers: Record<string, string> = {}) =>
  new APICallError({
    message: `provider answered ${statusCode}`,
    url: "https://provider.example/v1/chat",
    requestBodyValues: {},
    statusCode,
    responseHeaders: headers,
  });

const fast = { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 };

/** A provider that answers with `errors` in turn, then "hello"; counts the requests it got. */
const provider = (errors: ReadonlyArray<() => Error>) => {
  let requests = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      const error = errors[requests++];
      if (error) throw error();
      return answer("hello");
    },
  });
  return { model, requests: () => requests };
};

const run = async (model: MockLanguageModelV3, policy: ModelPolicy) => {
  const runtime = await openRuntime({
    store: join(tempDir(), "j.db"),
    agents: [
      defineAgent({
        name: "asker",
        version: "1",
        run: async (turn) => {
          const { text } = await generateText({
            model: journaledModel(turn, model, policy),
            prompt: "hi",
            maxRetries: 0,
          });
          return text;
        },
      }),
    ],
    tools: [],
  });
  try {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: {} });
    const result = await handle.result;
    const events = (await runtime.events(handle.runId)).map((e) => e.event);
    const audit = await runtime.audit();
    return { result, events, audit };
  } finally {
    await runtime.close();
  }
};

const ofType = <T extends AnyEvent["type"]>(events: ReadonlyArray<AnyEvent>, type: T) =>
  events.filter((e): e is EventOf<T> => e.type === type);

describe("journaledModel with a retry policy", () => {
  it("a 429 then an answer completes with 2 attempts recorded; Retry-After: 2 is the recorded delay", async () => {
    const { model, requests } = provider([() => apiError(429, { "retry-after": "2" })]);
    const { result, events, audit } = await run(model, { retry: { attempts: 3, backoff: fast } });
    expect(result).toMatchObject({ status: "completed", output: "hello" });
    expect(requests()).toBe(2);
    expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2]);
    expect(ofType(events, "call.failed")[0]?.error).toMatchObject({
      details: { statusCode: 429, retryAfter: "2" },
    });
    const [scheduled] = ofType(events, "retry.scheduled");
    expect(scheduled).toMatchObject({ attempt: 2, reason: "retry-after", delayMs: 2000 });
    expect(audit.findings).toEqual([]);
  });

  it("the default when follows the SDK's isRetryable too: a refusal the provider marked retryable is retried, an unmarked 400 is not", async () => {
    const marked = () =>
      new APICallError({
        message: "provider answered 400: try again",
        url: "https://provider.example/v1/chat",
        requestBodyValues: {},
        statusCode: 400,
        isRetryable: true,
      });
    const retried = provider([marked]);
    const first = await run(retried.model, { retry: { attempts: 2, backoff: fast } });
    expect(first.result).toMatchObject({ status: "completed", output: "hello" });
    expect(retried.requests()).toBe(2);
    const final = provider([() => apiError(400)]);
    const second = await run(final.model, { retry: { attempts: 2, backoff: fast } });
    expect(second.result).toMatchObject({ status: "held", reasons: [{ code: "decision-needed" }] });
    expect(final.requests()).toBe(1);
  });

  it('a 502 with inDoubt: "hold" is not retried: the run is held', async () => {
    const { model, requests } = provider([() => apiError(502)]);
    const { result, events } = await run(model, { inDoubt: "hold", retry: { attempts: 3, backoff: fast } });
    expect(result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
    expect(requests()).toBe(1);
    expect(ofType(events, "retry.scheduled")).toEqual([]);
  });

  it('a 502 with inDoubt: "replay" is retried by the policy, the attempt left in doubt and replayed', async () => {
    const { model, requests } = provider([() => apiError(502)]);
    const { result, events, audit } = await run(model, {
      inDoubt: "replay",
      retry: { attempts: 2, backoff: fast },
    });
    expect(result).toMatchObject({ status: "completed", output: "hello" });
    expect(requests()).toBe(2);
    expect(ofType(events, "call.failed")).toEqual([]);
    expect(ofType(events, "retry.scheduled").map((s) => s.attempt)).toEqual([2]);
    expect(audit.findings).toEqual([]);
  });

  it("a timeout aborts the provider's request through the AI SDK's abortSignal", async () => {
    let aborted = false;
    const model = new MockLanguageModelV3({
      doGenerate: ({ abortSignal }) =>
        new Promise((_resolve, reject) => {
          abortSignal?.addEventListener("abort", () => {
            aborted = true;
            reject(abortSignal.reason);
          });
        }),
    });
    const { result } = await run(model, { timeoutMs: 50 });
    expect(aborted).toBe(true);
    expect(result).toMatchObject({
      status: "held",
      reasons: [{ code: "indefinite-failure", detail: expect.stringContaining("timeout of 50 ms") }],
    });
  });
});
