import { type LanguageModelMiddleware, wrapLanguageModel } from "ai";
import type { ModelCallOptions, Turn } from "../../../runtime/define.js";
import { DefiniteFailure } from "../../../runtime/errors.js";
import type { RetryPolicy } from "../../../runtime/retry.js";
import { fromStored, toStored } from "./codec.js";
import { ProviderStreamError, StreamMaskDiverged } from "./errors.js";
import { LiveMask, maskToolInput } from "./liveMask.js";
import { generateResultOf, headersOf, streamOf } from "./outcome.js";
import { refusalDetails, refusedRequest } from "./refusal.js";
import type {
  CallOptions,
  GenerateResult,
  LanguageModelV3,
  StoredStream,
  StreamPart,
  StreamResult,
} from "./types.js";

export type { LanguageModelV3 } from "./types.js";

/** How one model's calls are journaled. */
export interface ModelPolicy {
  /** The calls' name in the journal (and for `HOLDFAST_CRASH_CALL`). Default `<provider>/<modelId>`. */
  readonly name?: string;
  /**
   * What recovery may do with a call of this model found in doubt. `hold` (default): a person
   * decides. `replay`: the team declares the model changes nothing outside (no tools run by the
   * provider, nothing billed that matters), so it is called again. Recorded in each intent.
   */
  readonly inDoubt?: "hold" | "replay";
  /**
   * Whether an error proves the provider did not act on the request: the call is then recorded as
   * failed definitely (a person may grant retries). Default {@link refusedRequest}. Any other error
   * leaves the call in doubt (law 4).
   */
  readonly definite?: (error: unknown) => boolean;
  /**
   * Send the call's idempotency key (`<callId>#<attempt>`) to the provider in this request header
   * (e.g. `"Idempotency-Key"`): a provider or gateway that honours it can refuse a repeat, and its
   * logs tie a request to its call — evidence for a person deciding a call in doubt.
   */
  readonly idempotencyHeader?: string;
  /**
   * Retry the calls' definite failures (by default a refusal with a retryable status: 408, 409,
   * 429, 503, 529, or one the SDK marked `isRetryable`), after the provider's `retry-after-ms` /
   * `Retry-After` or the backoff; with `inDoubt: "replay"` also an error that proves nothing (a 500,
   * 502 or 504, a reset). Each retry is a journaled attempt. Give the AI SDK `maxRetries: 0`: its
   * own retries would not be journaled, and never reach the provider through this middleware
   * (decisions 0042, 0046).
   *
   * @example
   * journaledModel(turn, openai("gpt-5"), { retry: { attempts: 4 }, timeoutMs: 60_000 });
   */
  readonly retry?: RetryPolicy;
  /** Abort each attempt after this long (the SDK's `abortSignal` gets the call's signal); then in doubt. */
  readonly timeoutMs?: number;
}

const nameOf = (model: LanguageModelV3, policy: ModelPolicy): string =>
  policy.name ?? `${model.provider}/${model.modelId}`;

/**
 * The provider's request: with the call's abort signal joined to the caller's (a timeout aborts
 * it), and the call's idempotency key in a header when the policy asks for it.
 */
const request = <R>(
  policy: ModelPolicy,
  params: CallOptions,
  idempotencyKey: string,
  signal: AbortSignal,
  direct: (params: CallOptions) => PromiseLike<R>,
): PromiseLike<R> =>
  direct({
    ...params,
    abortSignal: params.abortSignal ? AbortSignal.any([params.abortSignal, signal]) : signal,
    ...(policy.idempotencyHeader
      ? { headers: { ...params.headers, [policy.idempotencyHeader]: idempotencyKey } }
      : {}),
  });

const callOptions = (policy: ModelPolicy): ModelCallOptions => ({
  ...(policy.inDoubt ? { inDoubt: policy.inDoubt } : {}),
  ...(policy.retry ? { retry: policy.retry } : {}),
  ...(policy.timeoutMs === undefined ? {} : { timeoutMs: policy.timeoutMs }),
});

/**
 * What the intent records and the fingerprint covers: the model, the prompt, the tools offered and
 * the settings. Not the abort signal or the request headers: they are transport, not the question.
 */
const intentArgs = (mode: "generate" | "stream", model: LanguageModelV3, params: CallOptions): unknown =>
  toStored({
    mode,
    provider: model.provider,
    modelId: model.modelId,
    prompt: params.prompt,
    tools: params.tools,
    toolChoice: params.toolChoice,
    settings: {
      maxOutputTokens: params.maxOutputTokens,
      temperature: params.temperature,
      stopSequences: params.stopSequences,
      topP: params.topP,
      topK: params.topK,
      presencePenalty: params.presencePenalty,
      frequencyPenalty: params.frequencyPenalty,
      responseFormat: params.responseFormat,
      seed: params.seed,
      providerOptions: params.providerOptions,
    },
  });

/** The full result without the raw request and response bodies, each tool call's input masked as JSON. */
const storedGenerate = (result: GenerateResult, mask: <A>(value: A) => A): unknown =>
  toStored({
    content: result.content.map((part) =>
      part.type === "tool-call" ? { ...part, input: maskToolInput(mask, part.input) } : part,
    ),
    finishReason: result.finishReason,
    usage: result.usage,
    providerMetadata: result.providerMetadata,
    warnings: result.warnings,
    response: result.response && {
      id: result.response.id,
      timestamp: result.response.timestamp,
      modelId: result.response.modelId,
      headers: result.response.headers,
    },
  });

/** A definite failure if the policy says the error proves the request was refused; else the error. */
const asFailure = (error: unknown, policy: ModelPolicy): unknown => {
  if (error instanceof DefiniteFailure || !(policy.definite ?? refusedRequest)(error)) return error;
  const described = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return new DefiniteFailure(described, refusalDetails(error));
};

/**
 * Journal every model call of `turn`: an intent with the prompt and tools before the provider is
 * asked, the full result as the outcome after. A re-execution is answered from the journal, for
 * `generateText` and `streamText` alike; the provider is not asked again. A call that a crash left
 * in doubt holds the run (or, with `inDoubt: "replay"`, is asked again).
 *
 * Streams: parts reach the caller as the provider sends them, except the `finish` part, which waits
 * until the outcome is committed — the AI SDK starts tools on `finish`, and no tool may start while
 * the model call that asked for it is still in doubt.
 *
 * @example
 * const model = wrapLanguageModel({ model: openai("gpt-5"), middleware: journaledMiddleware(turn) });
 */
export const journaledMiddleware = (turn: Turn, policy: ModelPolicy = {}): LanguageModelMiddleware => ({
  specificationVersion: "v3",

  wrapGenerate: async ({ params, model }) => {
    const stored = await turn.model(
      nameOf(model, policy),
      intentArgs("generate", model, params),
      async (_args, { idempotencyKey, signal }) => {
        let result: GenerateResult;
        try {
          result = await request(policy, params, idempotencyKey, signal, (p) => model.doGenerate(p));
        } catch (error) {
          throw asFailure(error, policy);
        }
        return storedGenerate(result, (value) => turn.mask(value));
      },
      callOptions(policy),
    );
    return generateResultOf(fromStored(stored), nameOf(model, policy));
  },

  wrapStream: async ({ params, model }) => {
    const name = nameOf(model, policy);
    let out: ReadableStreamDefaultController<StreamPart> | undefined;
    let cancelled = false;
    const stream = new ReadableStream<StreamPart>({
      start: (controller) => {
        out = controller;
      },
      // The caller stopped reading: the provider's stream is still read to its end, so the
      // outcome is recorded and no call is left in doubt by a consumer that went away.
      cancel: () => {
        cancelled = true;
      },
    });
    const send = (part: StreamPart): void => {
      if (!cancelled) out?.enqueue(part);
    };
    // Whatever goes wrong on the way to the caller ends the caller's stream, never the host.
    const fail = (error: unknown): void => {
      try {
        if (!cancelled) out?.error(error);
      } catch {
        // The stream had ended already: the caller has all it will get.
      }
    };
    let live = false;
    let opened: (headers: StoredStream["headers"]) => void = () => undefined;
    const started = new Promise<StoredStream["headers"]>((resolve) => {
      opened = resolve;
    });

    // Started before any await: the call takes its seq in the order the SDK asked for it.
    const call = turn.model(
      name,
      intentArgs("stream", model, params),
      async (_args, { idempotencyKey, signal }): Promise<unknown> => {
        live = true;
        let source: StreamResult;
        try {
          source = await request(policy, params, idempotencyKey, signal, (p) => model.doStream(p));
        } catch (error) {
          throw asFailure(error, policy);
        }
        const headers = source.response?.headers && turn.mask(source.response.headers);
        opened(headers);
        // A stream cut in the middle proves nothing: that error stays indefinite.
        const reader = source.stream.getReader();
        const view = new LiveMask((value) => turn.mask(value), send);
        let finished = false;
        for (;;) {
          const next = await reader.read();
          if (next.done) break;
          const part = next.value;
          if (part.type === "error" || (part.type === "finish" && part.finishReason.unified === "error")) {
            // The rest of the stream cannot make the answer whole: stop reading it.
            reader.cancel().catch(() => undefined);
            throw inBand(part, name, policy);
          }
          if (part.type === "raw") continue;
          if (part.type === "finish" && !finished) {
            view.end();
            finished = true;
          }
          // `finish` and what follows wait for the outcome's commit: the AI SDK starts tools on `finish`.
          view.add(part, !finished);
        }
        if (!finished) {
          view.end();
          throw new ProviderStreamError({ model: name, detail: "the stream ended without a finish part" });
        }
        const outcome = { parts: view.parts, ...(headers ? { headers } : {}) };
        if (view.diverged || JSON.stringify(turn.mask(outcome)) !== JSON.stringify(outcome))
          throw new StreamMaskDiverged({ model: name });
        return outcome;
      },
      callOptions(policy),
    );

    const headers = await Promise.race([started, call.then(headersOf, () => undefined)]);
    call.then((stored) => {
      try {
        const { parts } = streamOf(fromStored(stored), name);
        // Live, everything before `finish` was sent already; from the journal, all of it is sent now.
        const from = live ? parts.findIndex((p) => p.type === "finish") : 0;
        if (from >= 0) for (const part of parts.slice(from)) send(part);
        if (!cancelled) out?.close();
      } catch (error) {
        fail(error);
      }
    }, fail);
    return headers ? { stream, response: { headers } } : { stream };
  },
});

/**
 * An error the provider put in its stream: a definite failure if the policy says it proves a
 * refusal, else it leaves the call in doubt (law 4) — a cut-short answer is not an outcome.
 */
const inBand = (
  part: Extract<StreamPart, { type: "error" | "finish" }>,
  name: string,
  policy: ModelPolicy,
): unknown => {
  const error =
    part.type === "error"
      ? part.error
      : new ProviderStreamError({
          model: name,
          detail: `it finished with reason "error"${part.finishReason.raw ? ` (${part.finishReason.raw})` : ""}`,
        });
  const failure = asFailure(error, policy);
  if (failure instanceof DefiniteFailure || failure instanceof ProviderStreamError) return failure;
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : JSON.stringify(toStored(error));
  return new ProviderStreamError({ model: name, detail });
};

/**
 * `model` with every call journaled in `turn` ({@link journaledMiddleware}).
 *
 * @example
 * const model = journaledModel(turn, openai("gpt-5"));
 * const { text } = await generateText({ model, tools: journaledTools(turn, [getWeather]), prompt });
 */
export const journaledModel = (
  turn: Turn,
  model: LanguageModelV3,
  policy: ModelPolicy = {},
): LanguageModelV3 => wrapLanguageModel({ model, middleware: journaledMiddleware(turn, policy) });
