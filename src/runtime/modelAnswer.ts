import * as Schema from "effect/Schema";
import { decodeInput } from "./input.js";

/** One tool call a model asked for, as a person reads it in the provider's log or dashboard. */
const ModelToolCall = Schema.Struct({
  toolName: Schema.NonEmptyTrimmedString,
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  toolCallId: Schema.optional(Schema.NonEmptyTrimmedString),
});

/**
 * A model's answer as people know it: its text, and the tool calls it asked for, if any. It is what
 * a person gives with `confirmed-completed` on a model call (decision 0036): the AI SDK middleware
 * turns it into a result of its own mode; a plain `turn.model` caller receives it as it is.
 */
export const ModelAnswer = Schema.Struct({
  text: Schema.String,
  toolCalls: Schema.optional(Schema.Array(ModelToolCall)),
});

/** A model's answer with every tool call's id filled in: what the journal stores and callers receive. */
export interface ModelAnswer {
  readonly text: string;
  readonly toolCalls?: ReadonlyArray<{
    readonly toolName: string;
    readonly input: Readonly<Record<string, unknown>>;
    readonly toolCallId: string;
  }>;
}

export { MODEL_ANSWER_HINT } from "./modelAnswerHint.js";

/**
 * Decode a person's answer for model call `callId`, refusing (InvalidInput, naming the field) what
 * does not fit — an unknown field too, since a misspelt `toolcalls` would otherwise vanish. A tool
 * call without an id gets one derived from the call, so every reader of the journal sees the same.
 */
export const decodeModelAnswer = (value: unknown, callId: string, name: string): ModelAnswer => {
  const answer = decodeInput(ModelAnswer, value, `answer for model call ${callId} (${name})`, "error");
  if (answer.toolCalls === undefined) return { text: answer.text };
  return {
    text: answer.text,
    toolCalls: answer.toolCalls.map((call, i) => ({
      toolName: call.toolName,
      input: call.input,
      // Providers accept only letters, digits, `_` and `-` in a tool call id.
      toolCallId: call.toolCallId ?? `${callId.replace(/[^A-Za-z0-9_-]/g, "-")}-tool-${i + 1}`,
    })),
  };
};
