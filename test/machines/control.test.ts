import { describe, expect, it } from "vitest";
import type { AnyEvent } from "../../src/events/index.js";
import {
  contextOf,
  foldRun,
  RUN_MACHINE_V1,
  RUN_MACHINE_V2,
  statusOf,
  step,
  TransitionRejected,
} from "../../src/machines/index.js";

const D = "d".repeat(64);

/** The machine's refusal of `type`, nothing else (a malformed event would throw otherwise). */
const refuses = (apply: () => unknown, type: string) => {
  expect(apply).toThrow(TransitionRejected);
  expect(apply).toThrow(new RegExp(`${type.replace(".", "\\.")}.*not accepted`));
};
const runId = "r1";

const admitted = (machine = RUN_MACHINE_V2): AnyEvent => ({
  type: "run.admitted",
  runId,
  chatId: "c",
  inputId: "i",
  inputDigest: D,
  agent: { name: "a", version: "1" },
  machine,
  input: null,
});
const intent = (seq: number): AnyEvent => ({
  type: "call.intended",
  runId,
  callId: `${runId}/${seq}`,
  seq,
  attempt: 1,
  kind: "tool",
  name: "t",
  args: {},
  fingerprint: D,
  disposition: "hold",
  pin: null,
  reconciler: null,
  idempotencyKey: `${runId}/${seq}#1`,
});
const completed = (seq: number): AnyEvent => ({
  type: "call.completed",
  runId,
  callId: `${runId}/${seq}`,
  attempt: 1,
  result: null,
  resultDigest: D,
});
const cancelRequested: AnyEvent = { type: "run.cancel-requested", runId, by: "ada", note: "n" };
const cancelled: AnyEvent = { type: "run.cancelled", runId, by: "ada", note: "n" };
const pauseRequested: AnyEvent = { type: "run.pause-requested", runId, by: "ada", note: "" };
const paused: AnyEvent = { type: "run.paused", runId };

describe("run machine: cancel and pause (run@2)", () => {
  it("a run is cancelled only after the request, and only with nothing in doubt", () => {
    expect(() => foldRun([admitted(), cancelled])).toThrow(/run.cancelled/);
    const inFlight = foldRun([admitted(), intent(0), cancelRequested]);
    expect(() => step(inFlight, cancelled)).toThrow(/run.cancelled/);
    const done = foldRun([admitted(), intent(0), cancelRequested, completed(0), cancelled]);
    expect(statusOf(done)).toBe("cancelled");
    expect(contextOf(done).cancelRequested).toEqual({ by: "ada", note: "n" });
  });

  it("a run asked to cancel never completes or fails: it ends cancelled", () => {
    const asked = foldRun([admitted(), cancelRequested]);
    refuses(
      () => step(asked, { type: "run.completed", runId, output: null, outputDigest: D }),
      "run.completed",
    );
    refuses(
      () => step(asked, { type: "run.failed", runId, error: { name: "E", message: "m" } }),
      "run.failed",
    );
  });

  it("a second cancel request is refused, and a pause while cancelling too", () => {
    const asked = foldRun([admitted(), cancelRequested]);
    refuses(() => step(asked, cancelRequested), "run.cancel-requested");
    refuses(() => step(asked, pauseRequested), "run.pause-requested");
  });

  it("a paused run takes only a resume, a cancel or a claim; the resume clears the pause", () => {
    const parked = foldRun([admitted(), intent(0), pauseRequested, completed(0), paused]);
    expect(statusOf(parked)).toBe("paused");
    refuses(() => step(parked, intent(1)), "call.intended");
    const resumed = step(parked, { type: "run.resumed", runId, by: "ada" });
    expect(statusOf(resumed)).toBe("running");
    expect(contextOf(resumed).pauseRequested).toBeUndefined();
    expect(statusOf(foldRun([cancelRequested, cancelled], parked))).toBe("cancelled");
  });

  it("a pause with a call in doubt is refused; an interrupted run may be paused or cancelled", () => {
    expect(() => foldRun([admitted(), intent(0), pauseRequested, paused])).toThrow(/run.paused/);
    const interrupted = foldRun([
      admitted(),
      { type: "run.interrupted", runId, detectedBy: "w", inDoubt: [] },
      cancelRequested,
      cancelled,
    ]);
    expect(statusOf(interrupted)).toBe("cancelled");
  });

  it("run@1 takes no control request", () => {
    refuses(() => foldRun([admitted(RUN_MACHINE_V1), cancelRequested]), "run.cancel-requested");
  });
});
