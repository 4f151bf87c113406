import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";

/** Any JSON value, already masked. (Not re-validated on read: the canonical encoding guarantees JSON.) */
export const Json = Schema.Unknown.annotations({
  identifier: "Json",
  arbitrary: () => (fc) => fc.jsonValue({ maxDepth: 3 }),
});

/** A masked error as it is stored: never a stack, never a secret. */
export const ErrorInfo = Schema.Struct({
  name: Schema.String,
  message: Schema.String,
  details: Schema.optional(Schema.Unknown),
});
export type ErrorInfo = typeof ErrorInfo.Type;

/** `wait`: a durable wait (`turn.sleep`, `turn.waitFor`): no effect, its outcome recorded when the run is woken (decision 0050). */
export const CallKind = Schema.Literal("model", "tool", "child", "document", "wait");
export type CallKind = typeof CallKind.Type;

/** What recovery may do with an in-doubt call; fixed in the intent. */
export const Disposition = Schema.Literal("replay", "reconcile", "hold");
export type Disposition = typeof Disposition.Type;

/** One recovery that found a run active with no live owner: when (its `run.interrupted`), and by whom. */
export const Interruption = Schema.Struct({ at: Schema.String, by: Schema.String });
export type Interruption = typeof Interruption.Type;

/**
 * Why a run is held: one entry per cause, naming the call when there is one. A `crash-loop` hold
 * lists the interruptions since the run's last outcome or decision.
 */
export const HoldReason = Schema.Struct({
  code: Schema.Literal(
    "indefinite-failure",
    "in-doubt",
    "pin-mismatch",
    "reconcile-unknown",
    "determinism",
    "corrupt",
    "decision-needed",
    "crash-loop",
    "cancelled-in-doubt",
  ),
  callId: Schema.optional(Schema.String),
  detail: Schema.String,
  interruptions: Schema.optional(Schema.Array(Interruption)),
});
export type HoldReason = typeof HoldReason.Type;

export { Digest };
