import { describe, expect, it } from "vitest";
import type { AnyEvent } from "../../src/events/index.js";
import { foldRun, RUN_MACHINE_V2, statusOf, step, TransitionRejected } from "../../src/machines/index.js";
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
const intent = (attempt: number, approval = attempt === 1): AnyEvent => ({
  type: "call.intended",
  runId,
  callId,
  seq: 0,
  attempt,
  kind: "tool",
  name: "pay",
  args: { amount: 500 },
  fingerprint: D,
  disposition: "hold",
  pin: D,
  reconciler: null,
  idempotencyKey: `${callId}#${attempt}`,
  ...(approval ? { approval: { editable: false, description: "pays" } } : {}),
});
const waiting: AnyEvent = { type: "run.waiting", runId, wait: "approval", callId };
const decided = (decision: "approved" | "denied", basedOnVersion: number, extra = {}): AnyEvent => ({
  type: "approval.recorded",
  runId,
  callId,
  decision,
  basedOnVersion,
  decidedBy: "ada",
  note: decision === "denied" ? "no" : "",
  ...extra,
});
const woken: AnyEvent = {
  type: "run.woken",
  runId,
  wait: "approval",
  callId,
  firedAt: "2026-12-05T10:00:00.000Z",
  by: "w",
};
const completed = (attempt: number): AnyEvent => ({
  type: "call.completed",
  runId,
  callId,
  attempt,
  result: "paid",
  resultDigest: D,
});
const deniedFailure: AnyEvent = {
  type: "call.failed",
  runId,
  callId,
  attempt: 1,
  definite: true,
  error: { name: "ApprovalDenied", message: "ada denied it: no", details: { by: "ada", note: "no" } },
};

const refuses = (events: ReadonlyArray<AnyEvent>, last: AnyEvent) => {
  const fold = foldRun(events);
  expect(() => step(fold, last)).toThrow(TransitionRejected);
};

describe("the run machine's approvals", () => {
  const parked = [admitted, intent(1), waiting];

  it("an approval is taken on the current version, for the awaited call, once; a denial needs a note", () => {
    expect(statusOf(foldRun([...parked, decided("approved", 3)]))).toBe("waiting");
    refuses(parked, decided("approved", 2));
    refuses(parked, { ...decided("approved", 3), callId: `${runId}/1` } as AnyEvent);
    refuses(parked, { ...decided("denied", 3), note: " " } as AnyEvent);
    refuses([...parked, decided("approved", 3)], decided("denied", 4));
  });

  it("edited arguments only for an editable tool", () => {
    refuses(parked, decided("approved", 3, { args: { amount: 1 }, argsDigest: D, note: "less" }));
    const editable = [
      admitted,
      { ...intent(1), approval: { editable: true, description: "" } } as AnyEvent,
      waiting,
    ];
    expect(
      statusOf(
        foldRun([...editable, decided("approved", 3, { args: { amount: 1 }, argsDigest: D, note: "less" })]),
      ),
    ).toBe("waiting");
  });

  it("the awaiting attempt never completes; the approved call runs its next attempt only after the wake-up", () => {
    refuses(parked, completed(1));
    refuses([...parked, decided("approved", 3)], intent(2, false));
    refuses([...parked, decided("approved", 3), woken], completed(1));
    const done = foldRun([...parked, decided("approved", 3), woken, intent(2, false), completed(2)]);
    expect(statusOf(done)).toBe("running");
  });

  it("a run waiting for approval is woken only once decided; a denied call takes no retry grant", () => {
    refuses(parked, woken);
    const denied = [...parked, decided("denied", 3), woken, deniedFailure];
    expect(statusOf(foldRun(denied))).toBe("running");
    refuses(denied, { type: "retry.granted", runId, callId, attempts: 1, grantedBy: "eve", note: "" });
    refuses(denied, intent(2, false));
  });
});

describe("the audit of approvals (effect-before-approval)", () => {
  const check = (log: ReadonlyArray<AnyEvent>) => {
    const laws = new RunLaws();
    return log.map((event) => laws.check(event)).filter((b) => b !== null);
  };

  it("an approved or denied call in order is clean", () => {
    expect(
      check([admitted, intent(1), waiting, decided("approved", 3), woken, intent(2, false), completed(2)]),
    ).toEqual([]);
    expect(check([admitted, intent(1), waiting, decided("denied", 3), woken, deniedFailure])).toEqual([]);
  });

  it("finds an effect's attempt with no approval, an outcome of the awaiting attempt, and an approval of nothing", () => {
    expect(check([admitted, intent(1), waiting, intent(2, false)])).toEqual([
      expect.objectContaining({ kind: "effect-before-approval" }),
    ]);
    expect(check([admitted, intent(1), waiting, decided("denied", 3), woken, intent(2, false)])).toEqual([
      expect.objectContaining({ kind: "effect-before-approval", detail: expect.stringMatching(/denied/) }),
    ]);
    expect(check([admitted, intent(1), waiting, completed(1)])).toEqual([
      expect.objectContaining({ kind: "effect-before-approval" }),
    ]);
    expect(check([admitted, intent(1, false), decided("approved", 2)])).toEqual([
      expect.objectContaining({
        kind: "effect-before-approval",
        detail: expect.stringMatching(/never awaited/),
      }),
    ]);
  });

  it("a saved record carries the approvals across a restore", () => {
    const laws = new RunLaws();
    for (const event of [admitted, intent(1), waiting]) laws.check(event);
    const restored = RunLaws.restore(laws.save());
    expect(restored.check(intent(2, false))).toMatchObject({ kind: "effect-before-approval" });
  });
});
