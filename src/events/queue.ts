import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";
import { ForkSpec } from "./run.js";
import { Json } from "./shared.js";

/** The stream of a chat's input queue: `queue-<chatId>` (decision 0045). */
export const QUEUE_STREAM_PREFIX = "queue-";
export const queueStreamId = (chatId: string): string => `${QUEUE_STREAM_PREFIX}${chatId}`;

/**
 * An input submitted with `whenBusy: "queue"` while its chat had an active run (or other inputs
 * queued before it): kept in order, admitted when the chat is free. `input` is masked like
 * `run.admitted`'s; the digest is the same keyed digest admission records.
 */
export const InputQueued = Schema.Struct({
  type: Schema.tag("input.queued"),
  chatId: Schema.String,
  inputId: Schema.String,
  inputDigest: Digest,
  agent: Schema.Struct({ name: Schema.String, version: Schema.String }),
  /**
   * Present (true) when the submit named `agentVersion`: the input is admitted with that version
   * only. Absent: `agent.version` is the newest when it was queued, and the runtime that admits it
   * takes its own newest version (decision 0062).
   */
  versionPinned: Schema.optional(Schema.Literal(true)),
  input: Json,
  by: Schema.optional(Schema.String),
  /** A fork waiting for its busy chat (decision 0083): admitted as a fork of this spec. */
  fork: Schema.optional(ForkSpec),
});

/** A queued input became a run: written in the same commit as that run's `run.admitted`. */
export const InputAdmitted = Schema.Struct({
  type: Schema.tag("input.admitted"),
  chatId: Schema.String,
  inputId: Schema.String,
  runId: Schema.String,
});

/**
 * A queued input taken out of the queue before admission: by a person (`by`), or by the runtime
 * when the same ids had been admitted as a run directly (`reason` names it).
 */
export const InputWithdrawn = Schema.Struct({
  type: Schema.tag("input.withdrawn"),
  chatId: Schema.String,
  inputId: Schema.String,
  by: Schema.String,
  reason: Schema.optional(Schema.String),
});

export const QueueEvent = Schema.Union(InputQueued, InputAdmitted, InputWithdrawn);
export type QueueEvent = typeof QueueEvent.Type;
