import type { AnyEvent } from "../../../events/index.js";
import { isRunEnding } from "../../../machines/index.js";

/**
 * The writes besides the event row that an event implies, the same on every engine: admissions
 * and the active-run guard. Both are protected by unique keys, so two writers racing on one chat
 * cannot both win (law 6).
 */
export type GuardWrite =
  | {
      readonly kind: "admit";
      readonly chatId: string;
      readonly inputId: string;
      readonly digest: string;
      readonly runId: string;
    }
  | { readonly kind: "finish"; readonly runId: string }
  /** A chat's queue grew or shrank by one pending input: the index recovery reads (decision 0045). */
  | { readonly kind: "queue"; readonly chatId: string }
  | { readonly kind: "dequeue"; readonly chatId: string }
  /** The run waits until `dueAtMs`: its row in the due index wakers read (decision 0050). */
  | {
      readonly kind: "wait";
      readonly runId: string;
      readonly dueAtMs: number;
      readonly wait: string;
      readonly callId: string;
    }
  /** The run left its wait (woken, or cancelled while waiting): its row in the due index goes. */
  | { readonly kind: "unwait"; readonly runId: string }
  /** A schedule's next tick (decision 0060): its row in the schedule index tick passes read. */
  | { readonly kind: "schedule-due"; readonly scheduleId: string; readonly dueAtMs: number }
  /** A schedule paused or deleted: no row, no tick. */
  | { readonly kind: "schedule-off"; readonly scheduleId: string };

export const guardWritesFor = (event: AnyEvent): ReadonlyArray<GuardWrite> => {
  if (event.type === "run.admitted") {
    return [
      {
        kind: "admit",
        chatId: event.chatId,
        inputId: event.inputId,
        digest: event.inputDigest,
        runId: event.runId,
      },
    ];
  }
  if (event.type === "decision.recorded" && event.run === "stop")
    return [{ kind: "finish", runId: event.runId }];
  // A signal wait without a timeout has no due time: it enters the index when its signal comes.
  if (event.type === "run.waiting")
    return event.dueAt === undefined
      ? []
      : [
          {
            kind: "wait",
            runId: event.runId,
            dueAtMs: Date.parse(event.dueAt),
            wait: event.wait,
            callId: event.callId,
          },
        ];
  // A signal the run waits for makes it due now (decision 0054): 0 sorts before every due time,
  // and no clock is read here, so the index says the same whatever process committed it.
  if (event.type === "signal.received" && event.wakes !== undefined)
    return [{ kind: "wait", runId: event.runId, dueAtMs: 0, wait: "signal", callId: event.wakes }];
  // A person's approve / deny makes the run due now, the same way (decision 0057).
  if (event.type === "approval.recorded")
    return [{ kind: "wait", runId: event.runId, dueAtMs: 0, wait: "approval", callId: event.callId }];
  if (event.type === "run.woken") return [{ kind: "unwait", runId: event.runId }];
  // A waiting run ends only by a cancel (the machine takes nothing else there).
  if (event.type === "run.cancelled")
    return [
      { kind: "finish", runId: event.runId },
      { kind: "unwait", runId: event.runId },
    ];
  if (event.type === "schedule.upserted")
    return event.nextDueAt === null
      ? [{ kind: "schedule-off", scheduleId: event.scheduleId }]
      : [{ kind: "schedule-due", scheduleId: event.scheduleId, dueAtMs: Date.parse(event.nextDueAt) }];
  if (event.type === "schedule.resumed" || event.type === "schedule.ticked")
    return [{ kind: "schedule-due", scheduleId: event.scheduleId, dueAtMs: Date.parse(event.nextDueAt) }];
  if (event.type === "schedule.paused" || event.type === "schedule.deleted")
    return [{ kind: "schedule-off", scheduleId: event.scheduleId }];
  if (event.type === "input.queued") return [{ kind: "queue", chatId: event.chatId }];
  if (event.type === "input.admitted" || event.type === "input.withdrawn")
    return [{ kind: "dequeue", chatId: event.chatId }];
  if (isRunEnding(event.type) && "runId" in event) return [{ kind: "finish", runId: String(event.runId) }];
  return [];
};

/** Describe an expected version for messages. */
export const describeExpected = (expected: number | string): string =>
  typeof expected === "number" ? `version ${expected}` : expected;

/** Check an expected version against the stream's current version (0 = no stream). */
export const expectedVersionMatches = (
  expected: number | "no-stream" | "stream-exists" | "any",
  current: number,
): boolean =>
  expected === "any" ||
  (expected === "no-stream" && current === 0) ||
  (expected === "stream-exists" && current > 0) ||
  expected === current;
