import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";
import { ErrorInfo, HoldReason, Json } from "./shared.js";

/** The first event of every run stream: who runs what, under which machine version. */
export const RunAdmitted = Schema.Struct({
  type: Schema.tag("run.admitted"),
  runId: Schema.String,
  chatId: Schema.String,
  inputId: Schema.String,
  inputDigest: Digest,
  agent: Schema.Struct({ name: Schema.String, version: Schema.String }),
  machine: Schema.String,
  input: Json,
});

/** A masked projection of the chat after a step. */
export const CheckpointSaved = Schema.Struct({
  type: Schema.tag("checkpoint.saved"),
  runId: Schema.String,
  chatId: Schema.String,
  afterSeq: Schema.Int,
  state: Json,
  digest: Digest,
});

/**
 * Why a run was interrupted, when the worker that records it knows: `journal-unavailable` — its
 * own execution stopped because the journal could not be written, and this same process re-opens
 * the run (decision 0086). Not counted toward the crash-loop cap.
 */
export const InterruptionCause = Schema.Literal("journal-unavailable");
export type InterruptionCause = typeof InterruptionCause.Type;

/**
 * Recovery found the run active with no live owner. `cause` is absent when nothing is known (an
 * owner that died or went away; every log written before decision 0086).
 */
export const RunInterrupted = Schema.Struct({
  type: Schema.tag("run.interrupted"),
  runId: Schema.String,
  detectedBy: Schema.String,
  inDoubt: Schema.Array(Schema.String),
  cause: Schema.optional(InterruptionCause),
});

export const RunHeld = Schema.Struct({
  type: Schema.tag("run.held"),
  runId: Schema.String,
  reasons: Schema.NonEmptyArray(HoldReason),
});

export const RunResumed = Schema.Struct({
  type: Schema.tag("run.resumed"),
  runId: Schema.String,
  by: Schema.String,
});

export const RunCompleted = Schema.Struct({
  type: Schema.tag("run.completed"),
  runId: Schema.String,
  output: Json,
  outputDigest: Digest,
});

export const RunFailed = Schema.Struct({
  type: Schema.tag("run.failed"),
  runId: Schema.String,
  error: ErrorInfo,
});

export const RunStopped = Schema.Struct({
  type: Schema.tag("run.stopped"),
  runId: Schema.String,
  reason: Schema.String,
});

/**
 * Someone asked the run to stop (`runtime.cancel`): from any process, without a claim. The owner
 * stops starting calls, aborts the ones in flight and ends the run `cancelled` (decision 0043).
 */
export const RunCancelRequested = Schema.Struct({
  type: Schema.tag("run.cancel-requested"),
  runId: Schema.String,
  by: Schema.String,
  note: Schema.String,
});

/** The run ended because it was cancelled; nothing was left in doubt. */
export const RunCancelled = Schema.Struct({
  type: Schema.tag("run.cancelled"),
  runId: Schema.String,
  by: Schema.String,
  note: Schema.String,
});

/** Someone asked the run to park before its next call (`runtime.pause`, decision 0044). */
export const RunPauseRequested = Schema.Struct({
  type: Schema.tag("run.pause-requested"),
  runId: Schema.String,
  by: Schema.String,
  note: Schema.String,
});

/** The run is parked: nothing in doubt, no execution; it waits for `run.resumed`. */
export const RunPaused = Schema.Struct({
  type: Schema.tag("run.paused"),
  runId: Schema.String,
});

/**
 * What a run waits for: a due time (`turn.sleep`, decision 0050), a named signal
 * (`turn.waitFor`, decision 0054), which may also have a due time (its timeout), or a person's
 * approval of a tool call before its effect starts (decision 0057).
 */
export const WaitKind = Schema.Literal("timer", "signal", "approval");
export type WaitKind = typeof WaitKind.Type;

/**
 * The run waits (decisions 0050, 0054): its wait call (`kind: "wait"`) is committed with this event,
 * the execution ends and holds no process; any worker wakes it from the due index once `dueAt`
 * passed, or once a signal named `name` is recorded.
 */
export const RunWaiting = Schema.Struct({
  type: Schema.tag("run.waiting"),
  runId: Schema.String,
  wait: WaitKind,
  /** The wait call the run is parked on. */
  callId: Schema.String,
  /** ISO 8601: a timer is not woken before this; a signal wait times out then. Absent: no timeout. */
  dueAt: Schema.optional(Schema.String),
  /** A signal wait: the signal's name. */
  name: Schema.optional(Schema.String),
});

/**
 * The wait is over (decision 0050): appended by the worker that claimed the run, on the version it
 * read, in one commit with the wait call's outcome; a second waker finds the run moved and writes
 * nothing, so a timer fires once. `firedAt` is the waker's clock: never before `dueAt`, unless a
 * signal consumed in the same commit (`signal.consumed` just before) woke it (decision 0054).
 */
export const RunWoken = Schema.Struct({
  type: Schema.tag("run.woken"),
  runId: Schema.String,
  wait: WaitKind,
  callId: Schema.String,
  dueAt: Schema.optional(Schema.String),
  firedAt: Schema.String,
  by: Schema.String,
});

/**
 * A signal sent to the run (`runtime.signal`, decision 0054): recorded once per `signalId`, its
 * payload masked (and sealed with a key), buffered until a wait named `name` consumes it.
 * `payloadDigest` is keyed over the payload before masking: the same id with another payload is
 * refused. `wakes` names the wait call it wakes when the run waits for this name right now: the
 * due index then marks the run due in the same commit, so any worker wakes it.
 */
export const SignalReceived = Schema.Struct({
  type: Schema.tag("signal.received"),
  runId: Schema.String,
  signalId: Schema.String,
  name: Schema.String,
  payload: Json,
  payloadDigest: Digest,
  by: Schema.String,
  wakes: Schema.optional(Schema.String),
});

/**
 * A wait call took a recorded signal (decision 0054): in the commit of the wait's intent when the
 * signal was buffered before it, or in the commit of the wake-up (`run.woken`). The wait call's
 * `call.completed` carries what the agent sees.
 */
export const SignalConsumed = Schema.Struct({
  type: Schema.tag("signal.consumed"),
  runId: Schema.String,
  signalId: Schema.String,
  name: Schema.String,
  callId: Schema.String,
});

/**
 * Something contradicted the journal: a second, different outcome for a call, or a call whose
 * fingerprint differs from its recorded intent. Recorded, never "fixed up".
 */
export const ConflictRecorded = Schema.Struct({
  type: Schema.tag("conflict.recorded"),
  runId: Schema.String,
  callId: Schema.optional(Schema.String),
  kind: Schema.Literal("outcome", "determinism"),
  detail: Schema.String,
  recorded: Json,
  attempted: Json,
});

/**
 * What a fork asked for (decision 0083): the source run, the first call that runs live (`atCall`,
 * a seq), who asked and why, and the outcomes a person gave in place of recorded ones (masked).
 * Recorded in `run.forked`, and in `input.queued` when the fork waits for a busy chat.
 */
export const ForkSpec = Schema.Struct({
  fromRunId: Schema.String,
  atCall: Schema.Int.pipe(Schema.nonNegative()),
  by: Schema.String,
  note: Schema.String,
  edits: Schema.Array(Schema.Struct({ seq: Schema.Int.pipe(Schema.nonNegative()), result: Json })),
});
export type ForkSpec = typeof ForkSpec.Type;

/**
 * This run is a fork (decision 0083): written in the commit of its `run.admitted`, before the calls
 * it reuses. `from` names the source run, the agent version that ran it, and the source stream's
 * version the fork read; `reused` and `edited` list the seqs served from the source's outcomes and
 * from a person's edits. The source stream itself is never written to.
 */
export const RunForked = Schema.Struct({
  type: Schema.tag("run.forked"),
  runId: Schema.String,
  from: Schema.Struct({
    runId: Schema.String,
    agent: Schema.Struct({ name: Schema.String, version: Schema.String }),
    version: Schema.Int.pipe(Schema.positive()),
  }),
  atCall: Schema.Int.pipe(Schema.nonNegative()),
  by: Schema.String,
  note: Schema.String,
  reused: Schema.Array(Schema.Int),
  edited: Schema.Array(Schema.Int),
});

export const RunEvent = Schema.Union(
  RunAdmitted,
  CheckpointSaved,
  RunInterrupted,
  RunHeld,
  RunResumed,
  RunCompleted,
  RunFailed,
  RunStopped,
  ConflictRecorded,
  RunCancelRequested,
  RunCancelled,
  RunPauseRequested,
  RunPaused,
  RunWaiting,
  RunWoken,
  SignalReceived,
  SignalConsumed,
  RunForked,
);
export type RunEvent = typeof RunEvent.Type;
