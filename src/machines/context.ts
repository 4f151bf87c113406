import type { CallKind, Disposition, HoldReason } from "../events/index.js";
import type { CallTable } from "./callTable.js";

/**
 * Where a call stands, as far as the journal knows.
 *  - `in-doubt`: intent committed, no outcome (the dangerous window);
 *  - `authorized`: in doubt, but a rule of law 3 allows the next attempt;
 *  - `completed` / `failed`: an outcome is recorded (reused on re-execution);
 *  - `unknown`: a person chose `resume`: closed with no outcome, surfaced as `OutcomeUnknown`.
 */
export type CallStatus = "in-doubt" | "authorized" | "completed" | "failed" | "unknown";

export interface CallState {
  readonly callId: string;
  readonly seq: number;
  readonly attempt: number;
  readonly kind: CallKind;
  readonly name: string;
  readonly fingerprint: string;
  readonly disposition: Disposition;
  readonly pin: string | null;
  readonly reconciler: string | null;
  readonly status: CallStatus;
  /** How the outcome was learnt, when there is one. */
  readonly via: "live" | "reconciled" | "confirmed" | null;
  readonly resultDigest: string | null;
  /** Remaining retries granted for a failed call. */
  readonly retriesLeft: number;
  /** Attempts in all that the latest intent's retry policy allows (absent: no policy). */
  readonly policyAttempts?: number;
  /** When a policy retry is scheduled: the time (ISO 8601) before which the next attempt must not start. */
  readonly dueAt?: string;
  /**
   * A tool call that awaited approval (decision 0057): whether the approver may edit its arguments,
   * and what a person decided (absent while it awaits).
   */
  readonly approval?: { readonly editable: boolean; readonly decision?: "approved" | "denied" };
  /**
   * A fork's copy (decision 0083): the outcome was reused from the source run or given by a person.
   * It belongs to the source: no retry policy re-decides it and no grant runs the call again.
   */
  readonly copied?: true;
}

export type RunStatus =
  | "admitting"
  | "running"
  | "interrupted"
  | "held"
  | "paused"
  | "waiting"
  | "completed"
  | "failed"
  | "stopped"
  | "cancelled";

/** Who asked a run to stop or park, and why (`run.cancel-requested`, `run.pause-requested`). */
export interface ControlRequest {
  readonly by: string;
  readonly note: string;
}

/**
 * The statuses that end a run and free its chat: each is recorded by the event `run.<status>`, and
 * the chat's next queued input is admitted after it (decision 0045). One list, so the coming
 * `cancelled` is one entry here.
 */
export const ENDING_STATUSES: ReadonlySet<RunStatus> = new Set<RunStatus>([
  "completed",
  "failed",
  "stopped",
  "cancelled",
]);

/** Whether an event type ends a run (`run.completed`, …): {@link ENDING_STATUSES} as events. */
export const isRunEnding = (type: string): boolean =>
  type.startsWith("run.") && ENDING_STATUSES.has(type.slice(4) as RunStatus);

export interface RunContext {
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  readonly agent: { readonly name: string; readonly version: string };
  readonly machine: string;
  /** The stream version of the last event folded in. */
  readonly version: number;
  /** The next `seq` a new call must take. */
  readonly nextSeq: number;
  /** By call id; an immutable table that shares what a change leaves alone. */
  readonly calls: CallTable<CallState>;
  readonly heldReasons: ReadonlyArray<HoldReason>;
  readonly conflicts: number;
  readonly lastCheckpointSeq: number | null;
  /** Checkpoints recorded so far; re-execution skips the ones already written. */
  readonly checkpoints: number;
  /** Set by `run.cancel-requested`: the run is to end `cancelled` (decision 0043). */
  readonly cancelRequested?: ControlRequest;
  /** Set by `run.pause-requested`, cleared by `run.resumed`: the run is to park (decision 0044). */
  readonly pauseRequested?: ControlRequest | undefined;
  /** Set by `run.waiting`, cleared by `run.woken`: what the run waits for (decision 0050). */
  readonly waiting?: RunWait | undefined;
  /** Signals recorded in the run, in order (`signal.received`, decision 0054); absent: none yet. */
  readonly signals?: ReadonlyArray<RunSignal>;
}

/** A run's wait: its kind, the wait call, when it is due, and for a signal wait the name. */
export interface RunWait {
  readonly wait: "timer" | "signal" | "approval";
  readonly callId: string;
  /** When a timer is due, or a signal wait times out; absent: a signal wait with no timeout. */
  readonly dueAt?: string;
  /** A signal wait: the name it waits for. */
  readonly name?: string;
  /** A signal wait: the signal consumed by the wake-up being committed (`signal.consumed`). */
  readonly signalId?: string;
  /** An approval wait: what a person decided (`approval.recorded`); the run is due from then on. */
  readonly decision?: "approved" | "denied";
}

/** A signal recorded in a run (decision 0054): buffered until a wait consumes it. */
export interface RunSignal {
  readonly signalId: string;
  readonly name: string;
  /** Keyed digest of the payload before masking: the same id with another payload is refused. */
  readonly payloadDigest: string;
  /** The wait call that consumed it; null while buffered. */
  readonly consumedBy: string | null;
}

/** The oldest signal named `name` that no wait consumed yet: what the next wait for it takes. */
export const bufferedSignal = (context: RunContext, name: string): RunSignal | undefined =>
  context.signals?.find((s) => s.name === name && s.consumedBy === null);

export const OPEN_STATUSES: ReadonlyArray<CallStatus> = ["in-doubt", "authorized"];
export const isOpen = (call: CallState): boolean => OPEN_STATUSES.includes(call.status);
export const openCalls = (context: RunContext): CallState[] => context.calls.values().filter(isOpen);
/** Calls that nothing authorizes to run again: they block resumption. */
export const blockingCalls = (context: RunContext): CallState[] =>
  context.calls.values().filter((c) => c.status === "in-doubt");
