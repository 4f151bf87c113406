import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";
import { CallKind, Disposition, ErrorInfo, Json } from "./shared.js";

/**
 * The intent: durably committed before the effect starts (law 1). It records everything recovery
 * needs, so a later change of configuration cannot silently change what happens to this call.
 */
export const CallIntended = Schema.Struct({
  type: Schema.tag("call.intended"),
  runId: Schema.String,
  callId: Schema.String,
  seq: Schema.Int.pipe(Schema.nonNegative()),
  attempt: Schema.Int.pipe(Schema.positive()),
  kind: CallKind,
  name: Schema.String,
  args: Json,
  fingerprint: Digest,
  disposition: Disposition,
  pin: Schema.NullOr(Digest),
  reconciler: Schema.NullOr(Schema.String),
  /** What the reconciler needs to find out later (a receipt folder, a target digest), computed before the effect. */
  probe: Schema.optional(Json),
  idempotencyKey: Schema.String,
});

export const CallCompleted = Schema.Struct({
  type: Schema.tag("call.completed"),
  runId: Schema.String,
  callId: Schema.String,
  attempt: Schema.Int.pipe(Schema.positive()),
  result: Json,
  resultDigest: Digest,
});

/** Only definite failures are outcomes (law 4); an indefinite one leaves the call in doubt. */
export const CallFailed = Schema.Struct({
  type: Schema.tag("call.failed"),
  runId: Schema.String,
  callId: Schema.String,
  attempt: Schema.Int.pipe(Schema.positive()),
  definite: Schema.Literal(true),
  error: ErrorInfo,
});

/** An adapter proved what happened to an in-doubt call. */
export const CallReconciled = Schema.Struct({
  type: Schema.tag("call.reconciled"),
  runId: Schema.String,
  callId: Schema.String,
  attempt: Schema.Int.pipe(Schema.positive()),
  outcome: Schema.Literal("completed", "not-completed"),
  evidence: Json,
  result: Schema.optional(Json),
  resultDigest: Schema.optional(Digest),
});

/** An in-doubt call may run again; the reason says which rule of law 3 allowed it. */
export const CallReplayAuthorized = Schema.Struct({
  type: Schema.tag("call.replay-authorized"),
  runId: Schema.String,
  callId: Schema.String,
  attempt: Schema.Int.pipe(Schema.positive()),
  reason: Schema.Literal("allowlisted", "idempotent-child", "decision", "model-policy"),
});

export const CallEvent = Schema.Union(
  CallIntended,
  CallCompleted,
  CallFailed,
  CallReconciled,
  CallReplayAuthorized,
);
export type CallEvent = typeof CallEvent.Type;
