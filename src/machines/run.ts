import { and, assign, setup } from "xstate";
import type { AnyEvent, EventOf } from "../events/index.js";
import { blockingCalls, type CallState, isOpen, openCalls, type RunContext } from "./context.js";

/** Bumped whenever the accepted event sequences change; old versions stay in the registry. */
export const RUN_MACHINE_VERSION = "run@1";

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

const callOf = (context: RunContext, callId: string): CallState | undefined => context.calls[callId];

const setCall = (context: RunContext, call: CallState): Readonly<Record<string, CallState>> => ({
  ...context.calls,
  [call.callId]: call,
});

const emptyContext: RunContext = {
  runId: "",
  chatId: "",
  inputId: "",
  agent: { name: "", version: "" },
  machine: RUN_MACHINE_VERSION,
  version: 0,
  nextSeq: 0,
  calls: {},
  heldReasons: [],
  conflicts: 0,
  lastCheckpointSeq: null,
  checkpoints: 0,
};

/**
 * The run lifecycle. Every stored event of a run stream is fed through this machine; an event the
 * machine does not accept in the current state is a violation of the laws, never silently applied.
 * The machine is pure: versions, ids and times arrive inside the events.
 */
export const runMachine = setup({
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
      const permitted = known.status === "authorized" || (known.status === "failed" && known.retriesLeft > 0);
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
    /** A run resumes only when every in-doubt call has been authorized or closed. */
    nothingBlocking: ({ context }) => blockingCalls(context).length === 0,
    /** Law 9: made on the current version, confirmations carry a note, calls named are in doubt. */
    decisionAllowed: when(["decision.recorded"], (context, event) => {
      if (event.basedOnVersion !== context.version) return false;
      if (CONFIRMATIONS.has(event.decision) && event.note.trim() === "") return false;
      return event.callIds.every((id) => callOf(context, id)?.status === "in-doubt");
    }),
    retryAllowed: when(
      ["retry.granted"],
      (context, event) => callOf(context, event.callId)?.status === "failed",
    ),
    sameRun: ({ context, event }) => "runId" in event && event.runId === context.runId,
    isStop: ({ event }) => event.type === "decision.recorded" && event.decision === "stop",
  },
  actions: {
    admit: assign(({ event }) => {
      const e = event as E<"run.admitted">;
      return {
        ...emptyContext,
        runId: e.runId,
        chatId: e.chatId,
        inputId: e.inputId,
        agent: e.agent,
        machine: e.machine,
      };
    }),
    intend: assign(({ context, event }) => {
      const e = event as E<"call.intended">;
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
        retriesLeft: Math.max(
          0,
          (callOf(context, e.callId)?.retriesLeft ?? 0) -
            (callOf(context, e.callId)?.status === "failed" ? 1 : 0),
        ),
      };
      return { calls: setCall(context, call), nextSeq: Math.max(context.nextSeq, e.seq + 1) };
    }),
    complete: assign(({ context, event }) => {
      const e = event as E<"call.completed">;
      const call = callOf(context, e.callId)!;
      return {
        calls: setCall(context, { ...call, status: "completed", via: "live", resultDigest: e.resultDigest }),
      };
    }),
    fail: assign(({ context, event }) => {
      const e = event as E<"call.failed">;
      const call = callOf(context, e.callId)!;
      return { calls: setCall(context, { ...call, status: "failed", via: "live" }) };
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
      let calls = context.calls;
      for (const id of e.callIds) {
        const call = calls[id]!;
        const status =
          e.decision === "resume"
            ? "unknown"
            : e.decision === "confirmed-completed"
              ? "completed"
              : e.decision === "stop"
                ? call.status
                : "authorized";
        calls = {
          ...calls,
          [id]: { ...call, status, via: e.decision === "confirmed-completed" ? "confirmed" : call.via },
        };
      }
      return { calls, heldReasons: [] };
    }),
    grantRetry: assign(({ context, event }) => {
      const e = event as E<"retry.granted">;
      const call = callOf(context, e.callId)!;
      return { calls: setCall(context, { ...call, status: "authorized", retriesLeft: e.attempts - 1 }) };
    }),
    hold: assign(({ event }) => ({ heldReasons: (event as E<"run.held">).reasons })),
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
  context: emptyContext,
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
        "run.claimed": { guard: "sameRun", actions: "bump" },
        "run.held": { guard: "sameRun", target: "held", actions: ["hold", "bump"] },
        "run.interrupted": { guard: "sameRun", target: "interrupted", actions: "bump" },
        "run.completed": { guard: "nothingOpen", target: "completed", actions: "bump" },
        "run.failed": { guard: "sameRun", target: "failed", actions: "bump" },
        "run.stopped": { guard: "sameRun", target: "stopped", actions: "bump" },
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
      },
    },
    held: {
      on: {
        // Calls already in flight when the run was held still get their outcomes recorded.
        "call.completed": { guard: "outcomeAllowed", actions: ["complete", "bump"] },
        "call.failed": { guard: "outcomeAllowed", actions: ["fail", "bump"] },
        "decision.recorded": [
          { guard: and(["decisionAllowed", "isStop"]), target: "stopped", actions: ["decide", "bump"] },
          { guard: "decisionAllowed", target: "running", actions: ["decide", "bump"] },
        ],
        "retry.granted": { guard: "retryAllowed", actions: ["grantRetry", "bump"] },
        "run.claimed": { guard: "sameRun", actions: "bump" },
        "run.held": { guard: "sameRun", actions: ["hold", "bump"] },
        // After a retry grant: nothing in doubt is left, the run continues.
        "run.resumed": { guard: "nothingBlocking", target: "running", actions: ["clearHold", "bump"] },
        "run.stopped": { guard: "sameRun", target: "stopped", actions: "bump" },
      },
    },
    completed: {},
    failed: {},
    stopped: {},
  },
});

export type RunMachine = typeof runMachine;
export { isOpen };
