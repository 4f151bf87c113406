import * as Data from "effect/Data";

/**
 * A model call's recorded outcome that the AI SDK cannot take: neither a result this middleware
 * stored nor a person's answer (`{ text, toolCalls? }`). The call's agent gets this error instead
 * of a crash; nothing is written, and the run ends failed with it.
 */
export class StoredOutcomeUnusable extends Data.TaggedError("StoredOutcomeUnusable")<{
  readonly model: string;
  readonly mode: "generate" | "stream";
  readonly detail: string;
}> {
  override get message(): string {
    return `the journal's outcome of model call "${this.model}" is not something the AI SDK can use in ${this.mode} mode (${this.detail}); the recorded outcome cannot change — start the conversation again with a new input, and record a model call's answer as {"text": …} when you confirm one`;
  }
}

/**
 * A provider reported an error inside its stream (an `error` part, or `finish` with reason
 * `error`). Nothing proves the answer is whole or that the request was not acted on: the call stays
 * in doubt (law 4) unless the policy's `definite` classifier says the error proves a refusal.
 */
export class ProviderStreamError extends Data.TaggedError("ProviderStreamError")<{
  readonly model: string;
  readonly detail: string;
}> {
  override get message(): string {
    return `the provider reported an error in the stream of model call "${this.model}" (${this.detail}); the answer may be cut short, so the call is left in doubt — decide new-attempt to ask the model again (\`holdfast show\` lists the decisions)`;
  }
}

/**
 * Text reached the caller in pieces masked as they came, and a secret only became recognisable
 * after part of it had been sent (a private key block, a quoted password, a registered secret with
 * spaces): what the caller saw differs from what the journal would store. The call is left in
 * doubt rather than diverge on re-execution.
 */
export class StreamMaskDiverged extends Data.TaggedError("StreamMaskDiverged")<{
  readonly model: string;
}> {
  override get message(): string {
    return `model call "${this.model}" streamed a secret that could only be masked after part of it had reached the caller, so the live answer differs from the one the journal keeps; the call is left in doubt — decide new-attempt to ask the model again`;
  }
}
