import type { LanguageModelMiddleware } from "ai";

type WrapOptions = Parameters<NonNullable<LanguageModelMiddleware["wrapGenerate"]>>[0];
/** The AI SDK's language model (specification v3), as `wrapLanguageModel` takes it. */
export type LanguageModelV3 = WrapOptions["model"];
export type CallOptions = WrapOptions["params"];
export type GenerateResult = Awaited<ReturnType<WrapOptions["doGenerate"]>>;
export type StreamResult = Awaited<ReturnType<WrapOptions["doStream"]>>;
export type StreamPart = StreamResult["stream"] extends ReadableStream<infer P> ? P : never;
export type Headers = NonNullable<NonNullable<StreamResult["response"]>["headers"]>;

/** The stored outcome of a streamed call: its parts (deltas merged, raw chunks left out). */
export interface StoredStream {
  readonly parts: ReadonlyArray<StreamPart>;
  readonly headers?: Headers;
}
