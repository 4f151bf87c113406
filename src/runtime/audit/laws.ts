import type { AnyEvent } from "../../events/index.js";
import type { Breach } from "./findings.js";

interface CallLaw {
  /** The latest attempt with an intent. */
  attempt: number;
  /** Outcomes recorded per attempt. */
  readonly outcomes: Map<number, number>;
  /** How many further attempts something authorized. */
  allowance: number;
  /** Attempts in all that the latest intent's retry policy allows (0: no policy). */
  policy: number;
  /** The latest attempt with a definite failure recorded (0: none). */
  failed: number;
  /** Whether the latest intent is a model call with disposition `replay` (a policy may retry it in doubt). */
  replayable?: boolean;
  /** When the attempt a `retry.scheduled` authorized is due (ms since the epoch), until its intent. */
  due?: { readonly attempt: number; readonly at: number };
}

/** How much earlier than its `dueAt` a policy attempt's intent may be recorded: clocks of two processes differ. */
export const DUE_SKEW_MS = 1_000;

type SavedCall = [
  callId: string,
  attempt: number,
  allowance: number,
  outcomes: Array<[number, number]>,
  policy?: number,
  failed?: number,
  replayable?: boolean,
  due?: { attempt: number; at: number } | null,
];
interface Saved {
  readonly held: boolean;
  readonly calls: ReadonlyArray<SavedCall>;
  /** The waits recorded (`run.waiting`): call id and due time (null: none), until woken. */
  readonly waits?: ReadonlyArray<[string, number | null]>;
  /** Signals recorded (`signal.received`): id, and whether a wait consumed it. */
  readonly signals?: ReadonlyArray<[string, boolean]>;
  /** Parked waits a consumed signal is waking. */
  readonly signalled?: ReadonlyArray<string>;
  /** Calls whose intent awaited approval: call id and what a person decided (null: nothing yet). */
  readonly approvals?: ReadonlyArray<[string, "approved" | "denied" | null]>;
}

const CONCERNS: ReadonlySet<string> = new Set([
  "call.intended",
  "call.completed",
  "call.failed",
  "call.reconciled",
  "call.replay-authorized",
  "retry.granted",
  "retry.scheduled",
  "decision.recorded",
  "run.held",
  "run.resumed",
  "run.completed",
  "run.failed",
  "run.stopped",
  "run.cancelled",
  "run.waiting",
  "run.woken",
  "signal.received",
  "signal.consumed",
  "approval.recorded",
]);

/**
 * The laws across one run's events, checked on their own, independently of the machine: no
 * outcome without intent, no new attempt without an authorization, one outcome per call attempt,
 * no decision on a run that is not held.
 */
export class RunLaws {
  private held = false;
  private readonly calls = new Map<string, CallLaw>();
  /** Waits recorded by `run.waiting` and not woken yet: call id → due time (ms since the epoch). */
  private readonly waits = new Map<string, number>();
  /** Signals recorded by `signal.received`: id → consumed by a wait yet (decision 0054). */
  private readonly signals = new Map<string, boolean>();
  /** Parked signal waits whose signal was consumed: their `run.woken` needs no due time. */
  private readonly signalled = new Set<string>();
  /** Calls whose intent awaited approval → what a person decided (null: nothing yet; decision 0057). */
  private readonly approvals = new Map<string, "approved" | "denied" | null>();

  /** Whether `check` looks at events of this type (others pass without reading the record). */
  static concerns(type: AnyEvent["type"]): boolean {
    return CONCERNS.has(type);
  }

  /** The record as text, to set aside while nothing needs it (a run that ended). */
  save(): string {
    const calls: SavedCall[] = [];
    for (const [callId, call] of this.calls)
      calls.push([
        callId,
        call.attempt,
        call.allowance,
        [...call.outcomes],
        call.policy,
        call.failed,
        call.replayable ?? false,
        call.due ?? null,
      ]);
    return JSON.stringify({
      held: this.held,
      calls,
      waits: [...this.waits].map(([callId, due]) => [callId, Number.isFinite(due) ? due : null]),
      signals: [...this.signals],
      signalled: [...this.signalled],
      approvals: [...this.approvals],
    } satisfies Saved);
  }

  /** A record from {@link RunLaws.save}. */
  static restore(text: string): RunLaws {
    const saved = JSON.parse(text) as Saved;
    const laws = new RunLaws();
    laws.held = saved.held;
    for (const [callId, due] of saved.waits ?? []) laws.waits.set(callId, due ?? Number.NaN);
    for (const [signalId, consumed] of saved.signals ?? []) laws.signals.set(signalId, consumed);
    for (const callId of saved.signalled ?? []) laws.signalled.add(callId);
    for (const [callId, decision] of saved.approvals ?? []) laws.approvals.set(callId, decision);
    for (const [callId, attempt, allowance, outcomes, policy, failed, replayable, due] of saved.calls)
      laws.calls.set(callId, {
        attempt,
        allowance,
        outcomes: new Map(outcomes),
        policy: policy ?? 0,
        failed: failed ?? 0,
        replayable: replayable ?? false,
        ...(due ? { due } : {}),
      });
    return laws;
  }

  /**
   * Check one event of the run and take it into account; the law it breaks, or null. `recordedAt`
   * (the envelope's) lets a policy attempt's intent be compared with its recorded due time.
   */
  check(event: AnyEvent, recordedAt?: string): Breach | null {
    switch (event.type) {
      case "call.intended": {
        const call = this.calls.get(event.callId);
        // An effect's attempt of a call that awaits approval, with no approval recorded (decision 0057).
        const approval = this.approvals.get(event.callId);
        if (event.attempt > 1 && approval !== undefined && approval !== "approved")
          return {
            kind: "effect-before-approval",
            detail: `attempt ${event.attempt} of ${event.callId} was intended, but ${approval === "denied" ? "a person denied the call" : "no approval.recorded approved it"}`,
          };
        if (event.approval !== undefined) {
          if (event.attempt !== 1)
            return {
              kind: "effect-before-approval",
              detail: `attempt ${event.attempt} of ${event.callId} asks for approval; only a call's first attempt may`,
            };
          // A fork's copy of a denied call carries the source's denial (decision 0083).
          this.approvals.set(event.callId, event.approval.decision ?? null);
        }
        const policy = event.retry?.attempts ?? 0;
        const replayable = event.kind === "model" && event.disposition === "replay";
        if (!call) {
          this.calls.set(event.callId, {
            attempt: event.attempt,
            outcomes: new Map(),
            allowance: 0,
            policy,
            failed: 0,
            replayable,
          });
          if (event.attempt > 1)
            return {
              kind: "replay-without-authorization",
              detail: `attempt ${event.attempt} of ${event.callId} has no earlier attempt`,
            };
          return null;
        }
        const authorized = call.allowance > 0;
        const due = call.due;
        delete call.due;
        call.policy = policy;
        call.replayable = replayable;
        call.attempt = Math.max(call.attempt, event.attempt);
        call.allowance = Math.max(0, call.allowance - 1);
        if (!authorized)
          return {
            kind: "replay-without-authorization",
            detail: `attempt ${event.attempt} of ${event.callId} started with nothing authorizing it (replay, reconciliation, decision or retry grant)`,
          };
        // A durable backoff: the attempt a policy scheduled starts no earlier than its dueAt.
        const at = recordedAt === undefined ? Number.NaN : Date.parse(recordedAt);
        if (due && due.attempt === event.attempt && Number.isFinite(at) && at < due.at - DUE_SKEW_MS)
          return {
            kind: "retry-before-due",
            detail: `attempt ${event.attempt} of ${event.callId} was intended at ${recordedAt}, before the due time ${new Date(due.at).toISOString()} its retry.scheduled recorded`,
          };
        return null;
      }
      case "call.completed":
      case "call.failed":
      case "call.reconciled":
      case "call.replay-authorized": {
        const call = this.calls.get(event.callId);
        if (!call || call.attempt < event.attempt)
          return {
            kind: "outcome-without-intent",
            detail: `${event.type} for attempt ${event.attempt} of ${event.callId}, which was never intended`,
          };
        // The attempt awaiting approval never starts its effect: its only outcome is a denial.
        const approval = this.approvals.get(event.callId);
        if (
          approval !== undefined &&
          event.attempt === 1 &&
          !(event.type === "call.failed" && approval === "denied" && event.error.name === "ApprovalDenied")
        )
          return {
            kind: "effect-before-approval",
            detail: `${event.type} for attempt 1 of ${event.callId}, the attempt that awaited approval (${approval ?? "not decided"}): its effect must never start`,
          };
        if (event.type === "call.replay-authorized") {
          call.allowance = Math.max(call.allowance, 1);
          return null;
        }
        if (event.type === "call.reconciled" && event.outcome === "not-completed")
          call.allowance = Math.max(call.allowance, 1);
        if (event.type === "call.failed") call.failed = Math.max(call.failed, event.attempt);
        return countOutcome(call, event.attempt, event.callId, event.type);
      }
      case "retry.granted": {
        const call = this.calls.get(event.callId);
        if (!call)
          return {
            kind: "outcome-without-intent",
            detail: `retry.granted for ${event.callId}, which was never intended`,
          };
        call.allowance = Math.max(call.allowance, event.attempts);
        // A person's grant authorizes the attempt now, whatever a policy had scheduled.
        delete call.due;
        return null;
      }
      case "retry.scheduled": {
        const call = this.calls.get(event.callId);
        if (!call)
          return {
            kind: "outcome-without-intent",
            detail: `retry.scheduled for ${event.callId}, which was never intended`,
          };
        // A policy retries only a definite failure of its latest attempt, and never past its attempts.
        const closed = call.failed === call.attempt || (call.replayable && !call.outcomes.get(call.attempt));
        if (!closed || event.attempt !== call.attempt + 1 || event.attempt > call.policy)
          return {
            kind: "replay-without-authorization",
            detail: `retry.scheduled for attempt ${event.attempt} of ${event.callId}, but the recorded policy allows ${call.policy} attempt(s) in all and attempt ${call.attempt} ${call.failed === call.attempt ? "failed" : "has no recorded definite failure"}`,
          };
        call.allowance = Math.max(call.allowance, 1);
        const dueAt = Date.parse(event.dueAt);
        if (Number.isFinite(dueAt)) call.due = { attempt: event.attempt, at: dueAt };
        return null;
      }
      case "decision.recorded": {
        if (!this.held)
          return {
            kind: "decision-not-held",
            detail: `a decision (${event.run}) on a run that was not held`,
          };
        this.held = false;
        for (const decided of event.calls) {
          const call = this.calls.get(decided.callId);
          if (!call)
            return {
              kind: "outcome-without-intent",
              detail: `the decision names ${decided.callId}, which was never intended`,
            };
          if (decided.decision === "new-attempt" || decided.decision === "confirmed-not-completed") {
            call.allowance = Math.max(call.allowance, 1);
            delete call.due;
          }
          if (decided.decision === "confirmed-completed" || decided.decision === "confirmed-not-completed") {
            const duplicate = countOutcome(
              call,
              call.attempt,
              decided.callId,
              `a ${decided.decision} decision`,
            );
            if (duplicate) return duplicate;
          }
        }
        return null;
      }
      case "run.waiting":
        this.waits.set(event.callId, event.dueAt === undefined ? Number.NaN : Date.parse(event.dueAt));
        return null;
      case "signal.received":
        this.signals.set(event.signalId, false);
        return null;
      case "signal.consumed": {
        // A wait takes only a signal the run recorded, and each signal once (decision 0054).
        const consumed = this.signals.get(event.signalId);
        if (consumed === undefined || consumed)
          return {
            kind: "signal-not-recorded",
            detail:
              consumed === undefined
                ? `${event.callId} consumed signal ${event.signalId} ("${event.name}"), but no signal.received recorded it`
                : `${event.callId} consumed signal ${event.signalId} ("${event.name}"), which a wait had consumed already`,
          };
        this.signals.set(event.signalId, true);
        if (this.waits.has(event.callId)) this.signalled.add(event.callId);
        return null;
      }
      case "approval.recorded": {
        const approval = this.approvals.get(event.callId);
        if (approval !== null || !this.waits.has(event.callId))
          return {
            kind: "effect-before-approval",
            detail: `approval.recorded (${event.decision}) for ${event.callId}, which ${approval === undefined ? "never awaited approval" : approval === null ? "was not waiting" : `was ${approval} already`}`,
          };
        this.approvals.set(event.callId, event.decision);
        // An approved call's next attempt is authorized by the approval.
        const call = this.calls.get(event.callId);
        if (call && event.decision === "approved") call.allowance = Math.max(call.allowance, 1);
        this.signalled.add(event.callId);
        return null;
      }
      case "run.woken": {
        const due = this.waits.get(event.callId);
        this.waits.delete(event.callId);
        // Woken by the signal consumed just before it: no due time needed, and none passed.
        if (due !== undefined && this.signalled.delete(event.callId)) return null;
        // A timer (or a signal wait's timeout) fires once, for a wait recorded with its due time,
        // and not before that time.
        if (due === undefined || !Number.isFinite(due))
          return {
            kind: "wake-without-due",
            detail: `run.woken for ${event.callId}, but no run.waiting recorded a due time for it (or it was woken already)`,
          };
        const fired = Date.parse(event.firedAt);
        const at = recordedAt === undefined ? Number.NaN : Date.parse(recordedAt);
        if (!(fired >= due) || (Number.isFinite(at) && at < due - DUE_SKEW_MS))
          return {
            kind: "wake-before-due",
            detail: `the wait ${event.callId} was woken (fired ${event.firedAt}, recorded ${recordedAt ?? "?"}) before its due time ${new Date(due).toISOString()}`,
          };
        return null;
      }
      case "run.held":
        this.held = true;
        return null;
      case "run.resumed":
      case "run.completed":
      case "run.failed":
      case "run.stopped":
      case "run.cancelled":
        this.held = false;
        return null;
      default:
        return null;
    }
  }
}

const countOutcome = (call: CallLaw, attempt: number, callId: string, what: string): Breach | null => {
  const seen = call.outcomes.get(attempt) ?? 0;
  call.outcomes.set(attempt, seen + 1);
  if (seen === 0) return null;
  return {
    kind: "duplicate-outcome",
    detail: `${what} is a second outcome for attempt ${attempt} of ${callId} (a different outcome must be a conflict.recorded)`,
  };
};
