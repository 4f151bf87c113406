import type { AnyEvent } from "../../events/index.js";

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
  | { readonly kind: "finish"; readonly runId: string };

const FINISHING = new Set(["run.completed", "run.failed", "run.stopped", "run.cancelled"]);

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
  if (FINISHING.has(event.type) && "runId" in event) return [{ kind: "finish", runId: String(event.runId) }];
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
