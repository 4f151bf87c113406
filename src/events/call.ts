import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";
import { CallKind, Disposition, ErrorInfo, Json } from "./shared.js";

/**
 * A retry policy as the intent records it (DESIGN §13): what the code declared when the call was
 * made. `when` says whose rule chose the failures to retry: the default (a model call's retryable
 * statuses, a tool's every `DefiniteFailure`) or a predicate in the code, which is not storable.
 */
export const RetryPolicy = Schema.Struct({
  /** Attempts in all, the first one included. */
  attempts: Schema.Int.pipe(Schema.between(1, 100)),
  backoff: Schema.Struct({
    initialMs: Schema.Int.pipe(Schema.nonNegative()),
    maxMs: Schema.Int.pipe(Schema.nonNegative()),
    factor: Schema.Finite.pipe(Schema.greaterThanOrEqualTo(1)),
    jitter: Schema.Number.pipe(Schema.between(0, 1)),
  }),
  when: Schema.Literal("default", "custom"),
  /** The longest `Retry-After` believed, when the code declared one (else 5 minutes; decision 0046). */
  maxRetryAfterMs: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
});
export type RetryPolicy = typeof RetryPolicy.Type;

/** What an intent awaiting approval records: whether the approver may edit the arguments, and what the tool does. */
export const ApprovalRequest = Schema.Struct({
  editable: Schema.Boolean,
  /** The tool's description, as the code declared it when the call was made (shown to the approver). */
  description: Schema.String,
  /**
   * Only in a fork's copy of a source call that a person denied (decision 0083): the denial stays
   * the fork's, so the agent sees `ApprovalDenied` and no retry grant runs the call.
   */
  decision: Schema.optional(Schema.Literal("denied")),
});
export type ApprovalRequest = typeof ApprovalRequest.Type;

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
  /** The retry policy declared in code; absent: no automatic retry (and in logs written before policies). */
  retry: Schema.optional(RetryPolicy),
  /** Where a person looks to learn whether this attempt happened, as the tool declared it (masked). */
  checkHint: Schema.optional(Schema.String),
  /**
   * This attempt awaits a person's approval (decision 0057): committed with `run.waiting { wait:
   * "approval" }`, its effect never starts. An `approved` decision lets the next attempt run (with
   * the edited arguments when the tool is `editable`); `denied` fails this attempt definitely.
   */
  approval: Schema.optional(ApprovalRequest),
});

/**
 * Where a fork's reused outcome comes from (decision 0083): the source run's event that recorded
 * it — a `call.completed`, `call.failed`, `call.reconciled` or `decision.recorded` — by stream
 * version, event id and chain hash. The audit finds it and checks the outcome is the same.
 */
export const OutcomeSource = Schema.Struct({
  runId: Schema.String,
  callId: Schema.String,
  version: Schema.Int.pipe(Schema.positive()),
  eventId: Schema.String,
  hash: Schema.String,
});
export type OutcomeSource = typeof OutcomeSource.Type;

/** An outcome a person gave a fork in place of the recorded one (decision 0083): who, and why. */
export const OutcomeEdit = Schema.Struct({ by: Schema.String, note: Schema.String });

export const CallCompleted = Schema.Struct({
  type: Schema.tag("call.completed"),
  runId: Schema.String,
  callId: Schema.String,
  attempt: Schema.Int.pipe(Schema.positive()),
  result: Json,
  resultDigest: Digest,
  /** A fork reused this outcome from another run (decision 0083). */
  reused: Schema.optional(OutcomeSource),
  /** A fork's outcome given by a person instead of the recorded one (decision 0083). */
  edited: Schema.optional(OutcomeEdit),
});

/** Only definite failures are outcomes (law 4); an indefinite one leaves the call in doubt. */
export const CallFailed = Schema.Struct({
  type: Schema.tag("call.failed"),
  runId: Schema.String,
  callId: Schema.String,
  attempt: Schema.Int.pipe(Schema.positive()),
  definite: Schema.Literal(true),
  error: ErrorInfo,
  /** A fork reused this definite failure from another run (decision 0083). */
  reused: Schema.optional(OutcomeSource),
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

/**
 * A definitely failed attempt will run again under the policy its intent recorded: attempt
 * `attempt` starts no earlier than `dueAt`, whichever process runs it (a durable backoff).
 */
export const RetryScheduled = Schema.Struct({
  type: Schema.tag("retry.scheduled"),
  runId: Schema.String,
  callId: Schema.String,
  /** The attempt that will run. */
  attempt: Schema.Int.pipe(Schema.positive()),
  /** ISO 8601: the next attempt does not start before this. */
  dueAt: Schema.String,
  delayMs: Schema.Int.pipe(Schema.nonNegative()),
  /** Where the delay came from: the policy's backoff, or the provider's `Retry-After`. */
  reason: Schema.Literal("backoff", "retry-after"),
  /**
   * Only when the failed attempt was left in doubt (a model call with `inDoubt: "replay"`, retried
   * by its policy without an outcome): the error that left it there, masked, so the attempt's error
   * is in the journal as a definite failure's is in its `call.failed`.
   */
  error: Schema.optional(ErrorInfo),
});

export const CallEvent = Schema.Union(
  CallIntended,
  CallCompleted,
  CallFailed,
  CallReconciled,
  CallReplayAuthorized,
  RetryScheduled,
);
export type CallEvent = typeof CallEvent.Type;
