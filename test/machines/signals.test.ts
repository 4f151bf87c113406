import { describe, expect, it } from "vitest";
import type { AnyEvent } from "../../src/events/index.js";
import {
  contextOf,
  foldRun,
  RUN_MACHINE_V2,
  statusOf,
  step,
  TransitionRejected,
} from "../../src/machines/index.js";
import { RunLaws } from "../../src/runtime/audit/laws.js";

const D = "d".repeat(64);
const runId = "r1";
const callId = `${runId}/0`;

const admitted: AnyEvent = {
  type: "run.admitted",
  runId,
  chatId: "c",
  inputId: "i",
  inputDigest: D,
  agent: { name: "a", version: "1" },
  machine: RUN_MACHINE_V2,
  input: null,
};
const intent: AnyEvent = {
  type: "call.intended",
  runId,
  callId,
  seq: 0,
  attempt: 1,
  kind: "wait",
  name: "waitFor",
  args: { name: "go" },
  fingerprint: D,
  disposition: "replay",
  pin: null,
  reconciler: null,
  idempotencyKey: `${callId}#1`,
};
const waiting: AnyEvent = { type: "run.waiting", runId, wait: "signal", callId, name: "go" };
const received = (signalId: string, wakes?: string): AnyEvent => ({
  type: "signal.received",
  runId,
  signalId,
  name: "go",
  payload: { n: 1 },
  payloadDigest: D,
  by: "ada",
  ...(wakes === undefined ? {} : { wakes }),
});
const consumed = (signalId: string): AnyEvent => ({
  type: "signal.consumed",
  runId,
  signalId,
  name: "go",
  callId,
});
const woken: AnyEvent = {
  type: "run.woken",
  runId,
  wait: "signal",
  callId,
  firedAt: "2026-12-05T10:00:00.000Z",
  by: "w",
};

const refuses = (events: ReadonlyArray<AnyEvent>, last: AnyEvent) => {
  const fold = foldRun(events);
  expect(() => step(fold, last)).toThrow(TransitionRejected);
};

describe("the run machine's signals", () => {
  it("a signal to a run waiting for its name must name the wait it wakes, and one to any other run must not", () => {
    refuses([admitted, intent, waiting], received("s1"));
    refuses([admitted], received("s1", callId));
    expect(statusOf(foldRun([admitted, intent, waiting, received("s1", callId)]))).toBe("waiting");
  });

  it("a signalId is recorded once", () => {
    refuses([admitted, received("s1")], received("s1"));
  });

  it("a signal wait without a timeout is woken only by the signal it consumed just before", () => {
    refuses([admitted, intent, waiting, received("s1", callId)], woken);
    const fold = foldRun([admitted, intent, waiting, received("s1", callId), consumed("s1"), woken]);
    expect(statusOf(fold)).toBe("running");
    expect(contextOf(fold).signals).toEqual([
      { signalId: "s1", name: "go", payloadDigest: D, consumedBy: callId },
    ]);
  });

  it("a wait takes only a recorded signal, the oldest of its name, once", () => {
    refuses([admitted, intent, waiting], consumed("nope"));
    refuses([admitted, received("s1"), received("s2"), intent], consumed("s2"));
    refuses([admitted, received("s1"), intent, consumed("s1")], consumed("s1"));
  });

  it("a signal wait parks on a buffered signal of its name only with a due time", () => {
    refuses([admitted, received("s1"), intent], waiting);
    const due = { ...waiting, dueAt: "2026-12-05T10:00:00.000Z" } as AnyEvent;
    expect(statusOf(foldRun([admitted, received("s1"), intent, due]))).toBe("waiting");
  });
});

describe("the audit of signals", () => {
  const check = (log: ReadonlyArray<AnyEvent>) => {
    const laws = new RunLaws();
    return log.map((event) => laws.check(event)).filter((b) => b !== null);
  };

  it("finds a consumed signal that was never recorded, or consumed twice; not one woken by its signal", () => {
    expect(check([admitted, intent, waiting, received("s1", callId), consumed("s1"), woken])).toEqual([]);
    // The wake-up it would have caused has no due time either: both are reported.
    expect(check([admitted, intent, waiting, consumed("s1"), woken])).toEqual([
      expect.objectContaining({
        kind: "signal-not-recorded",
        detail: expect.stringMatching(/no signal.received/),
      }),
      expect.objectContaining({ kind: "wake-without-due" }),
    ]);
    expect(check([admitted, received("s1"), intent, consumed("s1"), consumed("s1")])).toEqual([
      expect.objectContaining({
        kind: "signal-not-recorded",
        detail: expect.stringMatching(/consumed already/),
      }),
    ]);
    // Woken with neither its signal nor a due time.
    expect(check([admitted, intent, waiting, woken])).toEqual([
      expect.objectContaining({ kind: "wake-without-due" }),
    ]);
  });

  it("a saved record carries the signals and the waits across a restore", () => {
    const laws = new RunLaws();
    for (const event of [admitted, intent, waiting, received("s1", callId)]) laws.check(event);
    const restored = RunLaws.restore(laws.save());
    expect(restored.check(consumed("s1"))).toBeNull();
    expect(restored.check(woken)).toBeNull();
  });
});
