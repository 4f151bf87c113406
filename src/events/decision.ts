import { Schema } from "effect";
import { Json } from "./shared.js";

export const DecisionKind = Schema.Literal(
  "resume",
  "stop",
  "new-attempt",
  "confirmed-completed",
  "confirmed-not-completed",
);
export type DecisionKind = typeof DecisionKind.Type;

/** A person's decision on a held run, made on a named stream version (law 9). */
export const DecisionRecorded = Schema.Struct({
  type: Schema.tag("decision.recorded"),
  runId: Schema.String,
  decision: DecisionKind,
  basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
  decidedBy: Schema.String,
  note: Schema.String,
  callIds: Schema.Array(Schema.String),
  result: Schema.optional(Json),
});

/** An explicit, bounded permission to retry a definitely failed call. Never automatic. */
export const RetryGranted = Schema.Struct({
  type: Schema.tag("retry.granted"),
  runId: Schema.String,
  callId: Schema.String,
  attempts: Schema.Int.pipe(Schema.positive()),
  grantedBy: Schema.String,
  note: Schema.String,
});

export const DecisionEvent = Schema.Union(DecisionRecorded, RetryGranted);
export type DecisionEvent = typeof DecisionEvent.Type;
