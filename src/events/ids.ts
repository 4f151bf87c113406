import * as Schema from "effect/Schema";

/** A conversation. At most one active run per chat. */
export const ChatId = Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200), Schema.brand("ChatId"));
export type ChatId = typeof ChatId.Type;

/** A user message id, unique per chat. */
export const InputId = Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200), Schema.brand("InputId"));
export type InputId = typeof InputId.Type;

/** One durable turn. Its events live in the stream `run-<runId>`. */
export const RunId = Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200), Schema.brand("RunId"));
export type RunId = typeof RunId.Type;

/** `<runId>/<seq>`: one journaled call; `seq` counts calls in program order. */
export const CallId = Schema.NonEmptyTrimmedString.pipe(Schema.brand("CallId"));
export type CallId = typeof CallId.Type;

export const runStreamId = (runId: string): string => `run-${runId}`;
export const chatStreamId = (chatId: string): string => `chat-${chatId}`;
export const SYSTEM_STREAM = "system";
export const callIdOf = (runId: string, seq: number): CallId => `${runId}/${seq}` as CallId;

/** A lowercase hex SHA-256 digest. */
export const Digest = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/));
