/**
 * What a model call's recorded outcome becomes for the AI SDK. The journal holds either a result
 * this middleware stored (the provider's answer) or a person's answer given with `confirmed-completed`
 * (`{ text, toolCalls? }`, decision 0036). Each is checked before the SDK sees it: a value it could
 * not use is a `StoredOutcomeUnusable` of that call, never a throw the host cannot catch.
 */
import * as Schema from "effect/Schema";
import { ModelAnswer } from "../../../runtime/modelAnswer.js";
import { fromStored } from "./codec.js";
import { StoredOutcomeUnusable } from "./errors.js";
import type { GenerateResult, StoredStream, StreamPart } from "./types.js";

const AnyObject = Schema.Record({ key: Schema.String, value: Schema.Unknown });
const Usage = Schema.Struct({ inputTokens: AnyObject, outputTokens: AnyObject });
// Any unified reason: a provider newer than this code may send one it does not know yet.
const FinishReason = Schema.Struct({ unified: Schema.String, raw: Schema.optional(Schema.String) });
const ToolCall = Schema.Struct({
  type: Schema.Literal("tool-call"),
  toolCallId: Schema.String,
  toolName: Schema.String,
  input: Schema.String,
});
/** A part whose type has no fields checked here: the SDK reads only what it knows of it. */
const otherThan = (...types: ReadonlyArray<string>) =>
  Schema.Struct({ type: Schema.String.pipe(Schema.filter((t) => !types.includes(t))) });

const Content = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text", "reasoning"), text: Schema.String }),
  ToolCall,
  otherThan("text", "reasoning", "tool-call"),
);
const StoredGenerate = Schema.Struct({
  content: Schema.Array(Content),
  finishReason: FinishReason,
  usage: Usage,
  warnings: Schema.Array(Schema.Unknown),
});

const Part = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("text-delta", "reasoning-delta", "tool-input-delta"),
    id: Schema.String,
    delta: Schema.String,
  }),
  Schema.Struct({
    type: Schema.Literal("text-start", "text-end", "reasoning-start", "reasoning-end", "tool-input-end"),
    id: Schema.String,
  }),
  ToolCall,
  Schema.Struct({ type: Schema.Literal("finish"), usage: Usage, finishReason: FinishReason }),
  otherThan(
    "text-delta",
    "reasoning-delta",
    "tool-input-delta",
    "text-start",
    "text-end",
    "reasoning-start",
    "reasoning-end",
    "tool-input-end",
    "tool-call",
    "finish",
  ),
);
const StoredStreamShape = Schema.Struct({
  parts: Schema.Array(Part).pipe(
    Schema.filter((parts) => parts.some((p) => p.type === "finish") || "it has no finish part"),
  ),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
});

const isGenerate = Schema.is(StoredGenerate);
const isStream = Schema.is(StoredStreamShape);
const isAnswer = Schema.is(ModelAnswer);

/** A person's answer carries no token counts: zero, not unknown, so usage sums stay numbers. */
const NO_USAGE = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

const toolCallParts = (answer: typeof ModelAnswer.Type) =>
  (answer.toolCalls ?? []).map((call, i) => ({
    type: "tool-call" as const,
    // Decisions fill ids in; one given through the library without an id still needs one.
    toolCallId: call.toolCallId ?? `answer-tool-${i + 1}`,
    toolName: call.toolName,
    input: JSON.stringify(call.input),
  }));

const finishReasonOf = (answer: typeof ModelAnswer.Type) => ({
  unified: (answer.toolCalls?.length ?? 0) > 0 ? ("tool-calls" as const) : ("stop" as const),
  raw: undefined,
});

const unusable = (model: string, mode: "generate" | "stream", value: unknown) =>
  new StoredOutcomeUnusable({
    model,
    mode,
    detail: `it is neither a result the AI SDK gave for this mode nor an answer {"text": …}; it is ${describe(value)}`,
  });

const describe = (value: unknown): string => {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return `an object with ${Object.keys(value).join(", ") || "no fields"}`;
  return `a ${typeof value}`;
};

/** The generate result for a recorded outcome (already revived from its stored form). */
export const generateResultOf = (value: unknown, model: string): GenerateResult => {
  if (isGenerate(value)) return value as unknown as GenerateResult;
  if (isAnswer(value)) {
    return {
      content: [
        ...(value.text === "" ? [] : [{ type: "text" as const, text: value.text }]),
        ...toolCallParts(value),
      ],
      finishReason: finishReasonOf(value),
      usage: NO_USAGE,
      warnings: [],
    };
  }
  throw unusable(model, "generate", value);
};

/** The stream parts for a recorded outcome (already revived from its stored form). */
export const streamOf = (value: unknown, model: string): StoredStream => {
  if (isStream(value)) return value as unknown as StoredStream;
  if (isAnswer(value)) {
    const text: StreamPart[] =
      value.text === ""
        ? []
        : [
            { type: "text-start", id: "answer" },
            { type: "text-delta", id: "answer", delta: value.text },
            { type: "text-end", id: "answer" },
          ];
    return {
      parts: [
        { type: "stream-start", warnings: [] },
        ...text,
        ...toolCallParts(value),
        { type: "finish", usage: NO_USAGE, finishReason: finishReasonOf(value) },
      ],
    };
  }
  throw unusable(model, "stream", value);
};

/** The response headers of a recorded stream, if it has a usable shape and any. */
export const headersOf = (stored: unknown): StoredStream["headers"] => {
  const value = fromStored(stored);
  return isStream(value) ? (value as unknown as StoredStream).headers : undefined;
};
