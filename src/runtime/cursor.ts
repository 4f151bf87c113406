import type { AnyEvent, CallKind, ErrorInfo, HoldReason, RetryPolicy } from "../events/index.js";
import type { CallState } from "../machines/index.js";

/** What the journal recorded for a call: served on re-execution instead of running the effect. */
export type Recorded =
  | { readonly kind: "result"; readonly value: unknown }
  | { readonly kind: "error"; readonly error: ErrorInfo };

/** What re-execution does with a call the journal already knows (law 2, law 7). */
export type KnownCall =
  /** Serve the recorded result. */
  | { readonly kind: "serve"; readonly value: unknown }
  /**
   * Throw the recorded definite failure to the agent — unless `retry` is there and the policy takes
   * it: the latest attempt's intent recorded a policy with attempts left, and no `retry.scheduled`
   * followed the failure (a crash between the two commits, decision 0046).
   */
  | { readonly kind: "fail"; readonly error: ErrorInfo; readonly retry?: RecordedRetry }
  /** A person chose `resume`: the outcome stays unknown. */
  | { readonly kind: "unknown" }
  /** Run it (again): attempt number `attempt`. */
  | { readonly kind: "attempt"; readonly attempt: number }
  /** Stop: the call is in doubt, or the agent no longer makes the recorded call. */
  | { readonly kind: "hold"; readonly reason: HoldReason; readonly determinism?: DeterminismDetail };

/** What a policy needs to decide a recorded failure again: the intent's policy and when the failure was recorded. */
export interface RecordedRetry {
  readonly policy: RetryPolicy;
  /** The failure's `recordedAt`, in ms since the epoch: the due time is counted from it. */
  readonly failedAt: number;
}

/** An event as the cursor reads it: with its `recordedAt` when the journal gave one. */
export interface CursorEvent {
  readonly event: AnyEvent;
  readonly recordedAt?: string;
}

export interface DeterminismDetail {
  readonly recorded: { readonly kind: CallKind; readonly name: string; readonly fingerprint: string };
  readonly attempted: { readonly kind: CallKind; readonly name: string; readonly fingerprint: string };
}

/**
 * The journal cursor of one execution: outcomes recorded so far, and how each known call was last
 * allowed to run again. Built from the run's history and kept current as this execution records.
 */
export class ReplayCursor {
  private readonly recorded = new Map<string, Recorded>();
  /** Calls whose latest authorization re-admits the same child (recovery of an idempotent child). */
  private readonly sameChild = new Set<string>();
  /** The child input id each child call's latest intent used. */
  private readonly childKeys = new Map<string, string>();
  /** The retry policy each call's latest intent recorded. */
  private readonly policies = new Map<string, RetryPolicy>();
  /** When each call's latest definite failure was recorded (ms since the epoch). */
  private readonly failedAt = new Map<string, number>();
  /** Arguments an approver edited, by call (decision 0057): the approved attempt runs with them. */
  private readonly edits = new Map<string, unknown>();

  constructor(history: Iterable<CursorEvent>) {
    for (const { event, recordedAt } of history) this.remember(event, recordedAt);
  }

  remember(event: AnyEvent, recordedAt?: string): void {
    switch (event.type) {
      case "call.intended": {
        if (event.retry) this.policies.set(event.callId, event.retry);
        else this.policies.delete(event.callId);
        // Another call intended after a definite failure: the execution went on past it (its policy
        // had declined it, the agent caught CallFailed), so re-execution must not take it up again —
        // only a failure that is the run's last call is re-decided (decision 0046). (A sibling in
        // turn.all intended between the failure and its retry.scheduled errs the safe way: the
        // remaining attempts are not taken, as before.)
        this.failedAt.clear();
        const child = (event.probe as { childInputId?: unknown } | undefined)?.childInputId;
        if (event.kind === "child" && typeof child === "string") this.childKeys.set(event.callId, child);
        this.sameChild.delete(event.callId);
        break;
      }
      case "call.completed":
        this.recorded.set(event.callId, { kind: "result", value: event.result });
        break;
      case "call.failed": {
        this.recorded.set(event.callId, { kind: "error", error: event.error });
        const at = recordedAt === undefined ? Number.NaN : Date.parse(recordedAt);
        if (Number.isFinite(at)) this.failedAt.set(event.callId, at);
        else this.failedAt.delete(event.callId);
        break;
      }
      case "call.reconciled":
        if (event.outcome === "completed")
          this.recorded.set(event.callId, { kind: "result", value: event.result ?? null });
        break;
      case "call.replay-authorized":
        if (event.reason === "idempotent-child") this.sameChild.add(event.callId);
        break;
      case "approval.recorded":
        if (event.decision === "approved" && event.args !== undefined)
          this.edits.set(event.callId, event.args);
        break;
      case "decision.recorded":
        for (const decided of event.calls) {
          if (decided.decision === "confirmed-completed")
            this.recorded.set(decided.callId, { kind: "result", value: decided.result ?? null });
        }
        break;
    }
  }

  /** The arguments an approver edited for a call (stored, masked); undefined: none were edited. */
  editedArgs(callId: string): { readonly args: unknown } | undefined {
    return this.edits.has(callId) ? { args: this.edits.get(callId) } : undefined;
  }

  record(callId: string, outcome: Recorded): void {
    this.recorded.set(callId, outcome);
  }

  /**
   * The input id of a child call's child run: the call id for its first attempt and for a replay
   * recovery authorized (re-admission is idempotent, the same child goes on); a fresh one for an
   * attempt a person or a retry grant asked for, which must really run the child again.
   */
  childInputId(callId: string, attempt: number): string {
    if (attempt === 1) return callId;
    if (this.sameChild.has(callId)) return this.childKeys.get(callId) ?? callId;
    return `${callId}#${attempt}`;
  }

  /** Law 7 first, then law 2: what to do with a call the journal knows. */
  known(call: CallState, attempted: { kind: CallKind; name: string; fingerprint: string }): KnownCall {
    if (
      call.fingerprint !== attempted.fingerprint ||
      call.kind !== attempted.kind ||
      call.name !== attempted.name
    ) {
      return {
        kind: "hold",
        reason: {
          code: "determinism",
          callId: call.callId,
          detail: `call ${call.callId} was recorded as ${call.kind} "${call.name}" but the agent now makes ${attempted.kind} "${attempted.name}" with other arguments; restore the agent version that started the run, or decide the run`,
        },
        determinism: {
          recorded: { kind: call.kind, name: call.name, fingerprint: call.fingerprint },
          attempted,
        },
      };
    }
    switch (call.status) {
      case "completed": {
        const rec = this.recorded.get(call.callId);
        return { kind: "serve", value: rec?.kind === "result" ? rec.value : null };
      }
      case "failed": {
        const rec = this.recorded.get(call.callId);
        const error = rec?.kind === "error" ? rec.error : { name: "Error", message: "recorded failure" };
        // A fork's copied failure belongs to its source: thrown as recorded, never re-decided or run
        // again, since no call before the fork point runs (decision 0083).
        if (call.copied) return { kind: "fail", error };
        if (call.retriesLeft > 0) return { kind: "attempt", attempt: call.attempt + 1 };
        // A policy with attempts left and nothing after the failure (the machine's "failed" status:
        // no retry.scheduled, no grant): the policy may still take it, as it would have live.
        const policy = this.policies.get(call.callId);
        const failedAt = this.failedAt.get(call.callId);
        if (rec?.kind === "error" && policy && call.attempt < policy.attempts && failedAt !== undefined)
          return { kind: "fail", error, retry: { policy, failedAt } };
        return { kind: "fail", error };
      }
      case "unknown":
        return { kind: "unknown" };
      case "in-doubt":
        return {
          kind: "hold",
          reason: {
            code: "in-doubt",
            callId: call.callId,
            detail: `${call.kind} "${call.name}" attempt ${call.attempt} has an intent but no outcome`,
          },
        };
      case "authorized":
        return { kind: "attempt", attempt: call.attempt + 1 };
    }
  }
}
