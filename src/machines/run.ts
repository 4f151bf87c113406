import { and, assign, setup } from "xstate";
import type { AnyEvent, EventOf } from "../events/index.js";
import { CallTable } from "./callTable.js";
import {
  blockingCalls,
  bufferedSignal,
  type CallState,
  type CallStatus,
  isOpen,
  openCalls,
  type RunContext,
} from "./context.js";

/**
 * Machine versions. A run folds through the version recorded in its `run.admitted`; changing the
 * accepted event sequences means adding a version, never editing one (golden logs replay each).
 *  - `run@1`: one decision for every in-doubt call; a run could fail with calls open.
 *  - `run@2`: decisions per call, applied together, and the run stays held until nothing is left in
 *    doubt (`decision.recorded` is followed by `run.resumed`, `run.stopped` or `run.held`); a run may
 *    neither complete nor fail while a call is open.
 */
export const RUN_MACHINE_V1 = "run@1";
export const RUN_MACHINE_V2 = "run@2";
/** The version new runs are admitted with. */
export const RUN_MACHINE_VERSION = RUN_MACHINE_V2;

const CONFIRMATIONS = new Set(["confirmed-completed", "confirmed-not-completed"]);

type E<T extends AnyEvent["type"]> = EventOf<T>;
/** A guard that applies to the named event types only (an event of another type is refused). */
const when =
  <T extends AnyEvent["type"]>(
    types: ReadonlyArray<T>,
    predicate: (context: RunContext, event: E<T>) => boolean,
  ) =>
  ({ context, event }: { context: RunContext; event: AnyEvent }): boolean =>
    (types as ReadonlyArray<string>).includes(event.type) && predicate(context, event as E<T>);

const callOf = (context: RunContext, callId: string): CallState | undefined => context.calls.get(callId);

const setCall = (context: RunContext, call: CallState): CallTable<CallState> => context.calls.with(call);

const emptyContext = (machine: string): RunContext => ({
  runId: "",
  chatId: "",
  inputId: "",
  agent: { name: "", version: "" },
  machine,
  version: 0,
  nextSeq: 0,
  calls: CallTable.empty,
  heldReasons: [],
  conflicts: 0,
  lastCheckpointSeq: null,
  checkpoints: 0,
});

/** What a person's decision makes of an in-doubt call. */
const decidedStatus = (decision: string, current: CallStatus): CallStatus =>
  decision === "resume"
    ? "unknown"
    : decision === "confirmed-completed"
      ? "completed"
      : decision === "stop"
        ? current
        : "authorized";

/** Law 9: made on the current version; each named call in doubt, once; confirmations carry a note. */
const decisionValid = (context: RunContext, event: E<"decision.recorded">): boolean => {
  if (event.basedOnVersion !== context.version) return false;
  const seen = new Set<string>();
  for (const call of event.calls) {
    if (seen.has(call.callId)) return false;
    seen.add(call.callId);
    if (callOf(context, call.callId)?.status !== "in-doubt") return false;
    if (CONFIRMATIONS.has(call.decision) && call.note.trim() === "") return false;
  }
  return true;
};

const applyDecision = (context: RunContext, event: E<"decision.recorded">) => {
  let calls = context.calls;
  for (const decided of event.calls) {
    const call = calls.get(decided.callId)!;
    calls = calls.with({
      ...call,
      status: decidedStatus(decided.decision, call.status),
      via: decided.decision === "confirmed-completed" ? "confirmed" : call.via,
    });
  }
  return calls;
};

/**
 * A timer has a due time and no name; a signal wait has a name, maybe a due time (its timeout), and
 * parks on a buffered signal of its name only with a due time (the runtime sets it to now), so the
 * due index wakes it (decision 0054).
 */
const waitShapeValid = (context: RunContext, event: E<"run.waiting">): boolean => {
  const dueValid = event.dueAt === undefined || Number.isFinite(Date.parse(event.dueAt));
  // An approval has no due time: it waits for a person as long as it takes (decision 0057).
  if (event.wait === "approval") return event.dueAt === undefined && event.name === undefined;
  if (event.wait === "timer") return event.dueAt !== undefined && dueValid && event.name === undefined;
  // A signal buffered while the wait was being committed: it parks all the same, due at once.
  return (
    event.name !== undefined &&
    event.name !== "" &&
    dueValid &&
    (bufferedSignal(context, event.name) === undefined || event.dueAt !== undefined)
  );
};

const makeRunMachine = (version: typeof RUN_MACHINE_V1 | typeof RUN_MACHINE_V2) => {
  const v2 = version === RUN_MACHINE_V2;
  return setup({
    types: {
      context: {} as RunContext,
      events: {} as AnyEvent,
    },
    guards: {
      /** A new call takes the next seq; a known call may start again only when authorized. */
      intentAllowed: when(["call.intended"], (context, event) => {
        if (event.runId !== context.runId || event.callId !== `${context.runId}/${event.seq}`) return false;
        const known = callOf(context, event.callId);
        if (!known) return event.seq === context.nextSeq && event.attempt === 1;
        // A new attempt needs an authorization, or a retry grant with attempts left (never automatic).
        const permitted =
          known.status === "authorized" || (known.status === "failed" && known.retriesLeft > 0);
        return permitted && event.attempt === known.attempt + 1 && known.seq === event.seq;
      }),
      /** Outcomes close an open call of the same attempt, once (law 5). */
      outcomeAllowed: when(["call.completed", "call.failed"], (context, event) => {
        const call = callOf(context, event.callId);
        return call !== undefined && call.status === "in-doubt" && call.attempt === event.attempt;
      }),
      reconcileAllowed: when(["call.reconciled"], (context, event) => {
        const call = callOf(context, event.callId);
        return call !== undefined && call.status === "in-doubt" && call.attempt === event.attempt;
      }),
      replayAllowed: when(["call.replay-authorized"], (context, event) => {
        const call = callOf(context, event.callId);
        return call !== undefined && call.status === "in-doubt" && call.attempt === event.attempt;
      }),
      /** A run completes only when no call is left open. */
      nothingOpen: ({ context }) => openCalls(context).length === 0,
      /** From run@2 a run fails only when no call is left open either: its outcome must be known first. */
      mayFail: ({ context, event }) =>
        "runId" in event &&
        event.runId === context.runId &&
        (!v2 || openCalls(context).length === 0) &&
        context.cancelRequested === undefined,
      /** A run resumes only when every in-doubt call has been authorized or closed. */
      nothingBlocking: ({ context }) => blockingCalls(context).length === 0,
      decisionAllowed: when(["decision.recorded"], (context, event) => {
        if (!decisionValid(context, event)) return false;
        if (!v2) return true;
        // A call's `stop` stops the run; a result goes only with a confirmed completion.
        if (event.calls.some((c) => c.decision === "stop") && event.run !== "stop") return false;
        return event.calls.every((c) => c.result === undefined || c.decision === "confirmed-completed");
      }),
      /** A retry policy recorded in the failed attempt's intent allows the next attempt (never more). */
      retryScheduleAllowed: when(["retry.scheduled"], (context, event) => {
        const call = callOf(context, event.callId);
        // A model call declared replayable may be retried in doubt too, as recovery would replay it.
        const retryable =
          call?.status === "failed" ||
          (call?.status === "in-doubt" && call.kind === "model" && call.disposition === "replay");
        return (
          call !== undefined &&
          retryable &&
          call.approval?.decision !== "denied" &&
          call.copied === undefined &&
          event.attempt === call.attempt + 1 &&
          event.attempt <= (call.policyAttempts ?? 0)
        );
      }),
      // A denied call stays denied: no grant makes it run without an approval (decision 0057). A
      // fork's copied outcome belongs to its source: never run again in the fork (decision 0083).
      retryAllowed: when(["retry.granted"], (context, event) => {
        const call = callOf(context, event.callId);
        return call?.status === "failed" && call.approval?.decision !== "denied" && call.copied === undefined;
      }),
      sameRun: ({ context, event }) => "runId" in event && event.runId === context.runId,
      /** From run@2: a fork says so once, right after its admission, before any call (decision 0083). */
      forkAllowed: when(
        ["run.forked"],
        (context, event) =>
          v2 && event.runId === context.runId && context.version === 1 && context.nextSeq === 0,
      ),
      /** From run@2: one cancel request per run; a second one changes nothing and is refused. */
      cancelAllowed: ({ context, event }) =>
        v2 && "runId" in event && event.runId === context.runId && context.cancelRequested === undefined,
      /** One pause request at a time, and none once the run is being cancelled. */
      pauseAllowed: ({ context, event }) =>
        v2 &&
        "runId" in event &&
        event.runId === context.runId &&
        context.pauseRequested === undefined &&
        context.cancelRequested === undefined,
      /** A cancelled run leaves nothing in doubt (authorized calls are proven not done or replay-safe). */
      mayCancel: ({ context, event }) =>
        "runId" in event &&
        event.runId === context.runId &&
        context.cancelRequested !== undefined &&
        blockingCalls(context).length === 0,
      mayPause: ({ context, event }) =>
        "runId" in event &&
        event.runId === context.runId &&
        context.pauseRequested !== undefined &&
        context.cancelRequested === undefined &&
        blockingCalls(context).length === 0,
      /** A run asked to cancel ends cancelled, even when the agent returned. */
      nothingOpenNotCancelled: ({ context }) =>
        openCalls(context).length === 0 && context.cancelRequested === undefined,
      /**
       * A run waits on a wait call whose intent it just took, nothing else open, no cancel or pause
       * asked, and a due time that is a date (decision 0050).
       */
      waitAllowed: when(["run.waiting"], (context, event) => {
        const call = callOf(context, event.callId);
        const open = openCalls(context);
        return (
          v2 &&
          event.runId === context.runId &&
          call !== undefined &&
          // A wait call parks on its time or signal; a tool call whose intent awaits approval on that.
          (event.wait === "approval"
            ? call.approval !== undefined && call.approval.decision === undefined && call.attempt === 1
            : call.kind === "wait") &&
          call.status === "in-doubt" &&
          open.length === 1 &&
          open[0]!.callId === call.callId &&
          context.cancelRequested === undefined &&
          context.pauseRequested === undefined &&
          waitShapeValid(context, event)
        );
      }),
      /**
       * The wait the run is on, woken at or after its due time (the event's own clock: pure); a
       * signal wait also by the signal consumed just before, and it times out only with no signal
       * of its name buffered (decision 0054).
       */
      wakeAllowed: when(["run.woken"], (context, event) => {
        const waiting = context.waiting;
        if (
          event.runId !== context.runId ||
          waiting === undefined ||
          waiting.callId !== event.callId ||
          waiting.dueAt !== event.dueAt ||
          waiting.wait !== event.wait
        )
          return false;
        if (waiting.signalId !== undefined) return true;
        // An approval wait is woken by the decision recorded, at any time after it (decision 0057).
        if (waiting.wait === "approval") return waiting.decision !== undefined;
        const due = waiting.dueAt === undefined ? Number.NaN : Date.parse(waiting.dueAt);
        if (!(Date.parse(event.firedAt) >= due)) return false;
        return waiting.wait === "timer" || bufferedSignal(context, waiting.name ?? "") === undefined;
      }),
      /**
       * A signal is recorded once per id, on a run that has not ended; it names the wait it wakes
       * exactly when the run waits for its name now, so the due index cannot miss a wake-up.
       */
      signalAllowed: when(["signal.received"], (context, event) => {
        if (!v2 || event.runId !== context.runId || event.name === "") return false;
        if (context.signals?.some((s) => s.signalId === event.signalId)) return false;
        const waiting = context.waiting;
        const wakes =
          waiting?.wait === "signal" && waiting.name === event.name && waiting.signalId === undefined
            ? waiting.callId
            : undefined;
        return event.wakes === wakes;
      }),
      /**
       * A wait call takes the oldest buffered signal of its name, once: a wait call just intended
       * (the signal came first), or the signal wait the run is parked on, in its wake-up's commit.
       */
      consumeAllowed: when(["signal.consumed"], (context, event) => {
        const signal = bufferedSignal(context, event.name);
        if (event.runId !== context.runId || signal?.signalId !== event.signalId) return false;
        const waiting = context.waiting;
        if (waiting)
          return (
            waiting.wait === "signal" &&
            waiting.callId === event.callId &&
            waiting.name === event.name &&
            waiting.signalId === undefined
          );
        const call = callOf(context, event.callId);
        return call?.kind === "wait" && call.name === "waitFor" && call.status === "in-doubt";
      }),
      /**
       * A person's approve / deny (decision 0057): on the current version (law 9), for the call the
       * run awaits approval of, once; a denial says why; edited arguments only for an editable tool,
       * with a note.
       */
      approvalAllowed: when(["approval.recorded"], (context, event) => {
        const waiting = context.waiting;
        const call = callOf(context, event.callId);
        if (
          !v2 ||
          event.runId !== context.runId ||
          event.basedOnVersion !== context.version ||
          waiting?.wait !== "approval" ||
          waiting.callId !== event.callId ||
          waiting.decision !== undefined ||
          call?.approval === undefined
        )
          return false;
        if (event.decision === "denied") return event.note.trim() !== "" && event.args === undefined;
        if (event.args === undefined) return event.argsDigest === undefined;
        return call.approval.editable && event.argsDigest !== undefined && event.note.trim() !== "";
      }),
      isStop: ({ event }) => event.type === "decision.recorded" && event.run === "stop",
    },
    actions: {
      admit: assign(({ event }) => {
        const e = event as E<"run.admitted">;
        return {
          ...emptyContext(version),
          runId: e.runId,
          chatId: e.chatId,
          inputId: e.inputId,
          agent: e.agent,
          machine: e.machine,
        };
      }),
      intend: assign(({ context, event }) => {
        const e = event as E<"call.intended">;
        const known = callOf(context, e.callId);
        const call: CallState = {
          callId: e.callId,
          seq: e.seq,
          attempt: e.attempt,
          kind: e.kind,
          name: e.name,
          fingerprint: e.fingerprint,
          disposition: e.disposition,
          pin: e.pin,
          reconciler: e.reconciler,
          status: "in-doubt",
          via: null,
          resultDigest: null,
          retriesLeft: Math.max(0, (known?.retriesLeft ?? 0) - (known?.status === "failed" ? 1 : 0)),
          ...(e.retry ? { policyAttempts: e.retry.attempts } : {}),
          ...(e.approval
            ? {
                approval: {
                  editable: e.approval.editable,
                  // A fork's copy of a denied call holds the denial (decision 0083).
                  ...(e.approval.decision ? { decision: e.approval.decision } : {}),
                },
              }
            : known?.approval
              ? { approval: known.approval }
              : {}),
        };
        return { calls: setCall(context, call), nextSeq: Math.max(context.nextSeq, e.seq + 1) };
      }),
      complete: assign(({ context, event }) => {
        const e = event as E<"call.completed">;
        const call = callOf(context, e.callId)!;
        return {
          calls: setCall(context, {
            ...call,
            status: "completed",
            via: "live",
            resultDigest: e.resultDigest,
            ...(e.reused || e.edited ? { copied: true as const } : {}),
          }),
        };
      }),
      fail: assign(({ context, event }) => {
        const e = event as E<"call.failed">;
        const call = callOf(context, e.callId)!;
        const copied = e.reused ? { copied: true as const } : {};
        return { calls: setCall(context, { ...call, status: "failed", via: "live", ...copied }) };
      }),
      reconcile: assign(({ context, event }) => {
        const e = event as E<"call.reconciled">;
        const call = callOf(context, e.callId)!;
        const next: CallState =
          e.outcome === "completed"
            ? { ...call, status: "completed", via: "reconciled", resultDigest: e.resultDigest ?? null }
            : { ...call, status: "authorized" };
        return { calls: setCall(context, next) };
      }),
      authorize: assign(({ context, event }) => {
        const e = event as E<"call.replay-authorized">;
        const call = callOf(context, e.callId)!;
        return { calls: setCall(context, { ...call, status: "authorized" }) };
      }),
      decide: assign(({ context, event }) => {
        const e = event as E<"decision.recorded">;
        const decided = new Set(e.calls.map((c) => c.callId));
        return {
          calls: applyDecision(context, e),
          // run@1 leaves the hold at once; from run@2 the reasons of undecided calls stay.
          heldReasons: v2
            ? context.heldReasons.filter((r) => r.callId === undefined || !decided.has(r.callId))
            : [],
        };
      }),
      grantRetry: assign(({ context, event }) => {
        const e = event as E<"retry.granted">;
        const call = callOf(context, e.callId)!;
        return { calls: setCall(context, { ...call, status: "authorized", retriesLeft: e.attempts - 1 }) };
      }),
      scheduleRetry: assign(({ context, event }) => {
        const e = event as E<"retry.scheduled">;
        const call = callOf(context, e.callId)!;
        return { calls: setCall(context, { ...call, status: "authorized", dueAt: e.dueAt }) };
      }),
      hold: assign(({ event }) => ({ heldReasons: (event as E<"run.held">).reasons })),
      requestCancel: assign(({ event }) => {
        const e = event as E<"run.cancel-requested">;
        return { cancelRequested: { by: e.by, note: e.note } };
      }),
      requestPause: assign(({ event }) => {
        const e = event as E<"run.pause-requested">;
        return { pauseRequested: { by: e.by, note: e.note } };
      }),
      unpause: assign({ pauseRequested: undefined }),
      wait: assign(({ context, event }) => {
        const e = event as E<"run.waiting">;
        const call = callOf(context, e.callId)!;
        const due = e.dueAt === undefined ? {} : { dueAt: e.dueAt };
        return {
          calls: setCall(context, { ...call, status: "authorized", ...due }),
          waiting: {
            wait: e.wait,
            callId: e.callId,
            ...due,
            ...(e.name === undefined ? {} : { name: e.name }),
          },
        };
      }),
      receiveSignal: assign(({ context, event }) => {
        const e = event as E<"signal.received">;
        const signal = {
          signalId: e.signalId,
          name: e.name,
          payloadDigest: e.payloadDigest,
          consumedBy: null,
        };
        return { signals: [...(context.signals ?? []), signal] };
      }),
      consumeSignal: assign(({ context, event }) => {
        const e = event as E<"signal.consumed">;
        const signals = (context.signals ?? []).map((s) =>
          s.signalId === e.signalId ? { ...s, consumedBy: e.callId } : s,
        );
        return context.waiting
          ? { signals, waiting: { ...context.waiting, signalId: e.signalId } }
          : { signals };
      }),
      // The wait call's outcome is committed with the wake-up: it is open again until it lands. An
      // approved call may run its next attempt; a denied one's failure is committed with the wake-up.
      wake: assign(({ context, event }) => {
        const e = event as E<"run.woken">;
        const call = callOf(context, e.callId)!;
        const status = context.waiting?.decision === "approved" ? "authorized" : "in-doubt";
        return { calls: setCall(context, { ...call, status }), waiting: undefined };
      }),
      approve: assign(({ context, event }) => {
        const e = event as E<"approval.recorded">;
        const call = callOf(context, e.callId)!;
        return {
          calls: setCall(context, {
            ...call,
            approval: { editable: call.approval?.editable ?? false, decision: e.decision },
          }),
          waiting: { ...context.waiting!, decision: e.decision },
        };
      }),
      clearHold: assign({ heldReasons: [] }),
      checkpoint: assign(({ context, event }) => ({
        lastCheckpointSeq: (event as E<"checkpoint.saved">).afterSeq,
        checkpoints: context.checkpoints + 1,
      })),
      conflict: assign(({ context }) => ({ conflicts: context.conflicts + 1 })),
      /** Every accepted event is one stream version; decisions are checked against it (law 9). */
      bump: assign(({ context }) => ({ version: context.version + 1 })),
    },
  }).createMachine({
    id: "run",
    context: emptyContext(version),
    initial: "admitting",
    // Events every live state accepts.
    on: {
      "conflict.recorded": { guard: "sameRun", actions: ["conflict", "bump"] },
    },
    states: {
      admitting: {
        on: { "run.admitted": { target: "running", actions: ["admit", "bump"] } },
      },
      running: {
        on: {
          "call.intended": { guard: "intentAllowed", actions: ["intend", "bump"] },
          "call.completed": { guard: "outcomeAllowed", actions: ["complete", "bump"] },
          "call.failed": { guard: "outcomeAllowed", actions: ["fail", "bump"] },
          "call.reconciled": { guard: "reconcileAllowed", actions: ["reconcile", "bump"] },
          "call.replay-authorized": { guard: "replayAllowed", actions: ["authorize", "bump"] },
          "checkpoint.saved": { guard: "sameRun", actions: ["checkpoint", "bump"] },
          "retry.granted": { guard: "retryAllowed", actions: ["grantRetry", "bump"] },
          "retry.scheduled": { guard: "retryScheduleAllowed", actions: ["scheduleRetry", "bump"] },
          "run.claimed": { guard: "sameRun", actions: "bump" },
          "run.held": { guard: "sameRun", target: "held", actions: ["hold", "bump"] },
          "run.interrupted": { guard: "sameRun", target: "interrupted", actions: "bump" },
          "run.completed": { guard: "nothingOpenNotCancelled", target: "completed", actions: "bump" },
          "run.failed": { guard: "mayFail", target: "failed", actions: "bump" },
          "run.stopped": { guard: "sameRun", target: "stopped", actions: "bump" },
          "run.cancel-requested": { guard: "cancelAllowed", actions: ["requestCancel", "bump"] },
          "run.pause-requested": { guard: "pauseAllowed", actions: ["requestPause", "bump"] },
          "run.cancelled": { guard: "mayCancel", target: "cancelled", actions: "bump" },
          "run.paused": { guard: "mayPause", target: "paused", actions: "bump" },
          "run.waiting": { guard: "waitAllowed", target: "waiting", actions: ["wait", "bump"] },
          "signal.received": { guard: "signalAllowed", actions: ["receiveSignal", "bump"] },
          "signal.consumed": { guard: "consumeAllowed", actions: ["consumeSignal", "bump"] },
          "run.forked": { guard: "forkAllowed", actions: "bump" },
        },
      },
      // Parked on a wait (decision 0050): no execution, nothing in doubt; woken when due, by any worker.
      waiting: {
        on: {
          "run.claimed": { guard: "sameRun", actions: "bump" },
          "run.woken": { guard: "wakeAllowed", target: "running", actions: ["wake", "bump"] },
          "run.cancel-requested": { guard: "cancelAllowed", actions: ["requestCancel", "bump"] },
          "run.cancelled": { guard: "mayCancel", target: "cancelled", actions: "bump" },
          // Paused while waiting: it keeps waiting, and parks paused once woken (decision 0051).
          "run.pause-requested": { guard: "pauseAllowed", actions: ["requestPause", "bump"] },
          "approval.recorded": { guard: "approvalAllowed", actions: ["approve", "bump"] },
          "signal.received": { guard: "signalAllowed", actions: ["receiveSignal", "bump"] },
          "signal.consumed": { guard: "consumeAllowed", actions: ["consumeSignal", "bump"] },
        },
      },
      interrupted: {
        on: {
          "call.reconciled": { guard: "reconcileAllowed", actions: ["reconcile", "bump"] },
          "call.replay-authorized": { guard: "replayAllowed", actions: ["authorize", "bump"] },
          "run.claimed": { guard: "sameRun", actions: "bump" },
          "run.interrupted": { guard: "sameRun", actions: "bump" },
          "run.held": { guard: "sameRun", target: "held", actions: ["hold", "bump"] },
          "run.resumed": { guard: "nothingBlocking", target: "running", actions: "bump" },
          "run.stopped": { guard: "sameRun", target: "stopped", actions: "bump" },
          "run.cancel-requested": { guard: "cancelAllowed", actions: ["requestCancel", "bump"] },
          "run.pause-requested": { guard: "pauseAllowed", actions: ["requestPause", "bump"] },
          "run.cancelled": { guard: "mayCancel", target: "cancelled", actions: "bump" },
          "run.paused": { guard: "mayPause", target: "paused", actions: "bump" },
          "signal.received": { guard: "signalAllowed", actions: ["receiveSignal", "bump"] },
        },
      },
      // Parked by a pause: no execution, nothing in doubt; it survives restarts until resumed.
      paused: {
        on: {
          "run.claimed": { guard: "sameRun", actions: "bump" },
          "run.cancel-requested": { guard: "cancelAllowed", actions: ["requestCancel", "bump"] },
          "run.cancelled": { guard: "mayCancel", target: "cancelled", actions: "bump" },
          "run.resumed": { guard: "sameRun", target: "running", actions: ["unpause", "bump"] },
          "signal.received": { guard: "signalAllowed", actions: ["receiveSignal", "bump"] },
        },
      },
      held: {
        on: {
          // Calls already in flight when the run was held still get their outcomes recorded.
          "call.completed": { guard: "outcomeAllowed", actions: ["complete", "bump"] },
          "call.failed": { guard: "outcomeAllowed", actions: ["fail", "bump"] },
          "decision.recorded": v2
            ? { guard: "decisionAllowed", actions: ["decide", "bump"] }
            : [
                { guard: and(["decisionAllowed", "isStop"]), target: "stopped", actions: ["decide", "bump"] },
                { guard: "decisionAllowed", target: "running", actions: ["decide", "bump"] },
              ],
          "retry.granted": { guard: "retryAllowed", actions: ["grantRetry", "bump"] },
          "run.claimed": { guard: "sameRun", actions: "bump" },
          "run.held": { guard: "sameRun", actions: ["hold", "bump"] },
          // After a retry grant or the decisions: nothing in doubt is left, the run continues.
          "run.resumed": { guard: "nothingBlocking", target: "running", actions: ["clearHold", "bump"] },
          "run.stopped": { guard: "sameRun", target: "stopped", actions: "bump" },
          "signal.received": { guard: "signalAllowed", actions: ["receiveSignal", "bump"] },
        },
      },
      completed: {},
      failed: {},
      stopped: {},
      cancelled: {},
    },
  });
};

export const runMachineV1 = makeRunMachine(RUN_MACHINE_V1);
export const runMachineV2 = makeRunMachine(RUN_MACHINE_V2);
/** The machine new runs use. */
export const runMachine = runMachineV2;

export type RunMachine = typeof runMachineV1;
export { isOpen };
