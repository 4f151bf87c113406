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
const runId = "r1";
const DUE = "2026-12-05T10:00:00.000Z";

const refuses = (apply: () => unknown, type: string) => {
  expect(apply).toThrow(TransitionRejected);
  expect(apply).toThrow(new RegExp(`${type.replace(".", "\\.")}.*not accepted`));
};

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
const intent = (seq: number, kind: "tool" | "wait"): AnyEvent => ({
  type: "call.intended",
  runId,
  callId: `${runId}/${seq}`,
  seq,
  attempt: 1,
  kind,
  name: kind === "wait" ? "sleep" : "t",
  args: {},
  fingerprint: D,
  disposition: kind === "wait" ? "replay" : "hold",
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
const waiting = (seq: number): AnyEvent => ({
  type: "run.waiting",
  runId,
  wait: "timer",
  callId: `${runId}/${seq}`,
  dueAt: DUE,
});
const woken = (seq: number, firedAt: string): AnyEvent => ({
  type: "run.woken",
  runId,
  wait: "timer",
  callId: `${runId}/${seq}`,
  dueAt: DUE,
  firedAt,
  by: "w1",
});

describe("run machine: waiting (run@2, decision 0050)", () => {
  it("a run waits on its wait call and is woken at its due time, the wait's outcome closing the call", () => {
    const parked = foldRun([admitted(), intent(0, "wait"), waiting(0)]);
    expect(statusOf(parked)).toBe("waiting");
    expect(contextOf(parked).waiting).toEqual({ wait: "timer", callId: "r1/0", dueAt: DUE });
    expect(contextOf(parked).calls.get("r1/0")).toMatchObject({ status: "authorized", dueAt: DUE });
    const again = step(step(parked, woken(0, DUE)), completed(0));
    expect(statusOf(again)).toBe("running");
    expect(contextOf(again).waiting).toBeUndefined();
    expect(contextOf(again).calls.get("r1/0")?.status).toBe("completed");
  });

  it("a wake-up before the due time, or of another call, is refused", () => {
    const parked = foldRun([admitted(), intent(0, "wait"), waiting(0)]);
    refuses(() => step(parked, woken(0, "2026-12-05T09:59:59.999Z")), "run.woken");
    refuses(() => step(parked, { ...woken(0, DUE), callId: "r1/1" } as AnyEvent), "run.woken");
    refuses(
      () => step(parked, { ...woken(0, DUE), dueAt: "2026-12-05T09:00:00.000Z" } as AnyEvent),
      "run.woken",
    );
  });

  it("a run waits only on a wait call that is its only open call", () => {
    const open = foldRun([admitted(), intent(0, "tool"), intent(1, "wait")]);
    refuses(() => step(open, waiting(1)), "run.waiting");
    const tool = foldRun([admitted(), intent(0, "tool")]);
    refuses(() => step(tool, waiting(0)), "run.waiting");
    refuses(() => step(foldRun([admitted(RUN_MACHINE_V1), intent(0, "wait")]), waiting(0)), "run.waiting");
  });

  it("a waiting run is cancelled in one commit; a pause request leaves it waiting", () => {
    const parked = foldRun([admitted(), intent(0, "wait"), waiting(0)]);
    const cancelled = foldRun([
      admitted(),
      intent(0, "wait"),
      waiting(0),
      { type: "run.cancel-requested", runId, by: "ada", note: "" },
      { type: "run.cancelled", runId, by: "ada", note: "" },
    ]);
    expect(statusOf(cancelled)).toBe("cancelled");
    const pausing = step(parked, { type: "run.pause-requested", runId, by: "ada", note: "" });
    expect(statusOf(pausing)).toBe("waiting");
    expect(statusOf(step(pausing, woken(0, DUE)))).toBe("running");
    // Nothing else moves a waiting run: no new call, no end.
    refuses(() => step(parked, intent(1, "tool")), "call.intended");
    refuses(
      () => step(parked, { type: "run.completed", runId, output: null, outputDigest: D }),
      "run.completed",
    );
  });
});
