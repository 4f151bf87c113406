import { describe, expect, it } from "vitest";
import type { RecordedEvent } from "../../src/events/index.js";
import { type ApprovalEffect, checkApproval } from "../../torture/check-waits.js";

/**
 * The approval kind's check on hand-made journals (decision 0064): each law it enforces is seen to
 * fail here; the torture slices show it passing on real runs.
 */
type Ev = Record<string, unknown>;
const admitted = (runId: string): Ev => ({
  type: "run.admitted",
  runId,
  chatId: "torture",
  inputId: "trial",
  inputDigest: "d",
  agent: { name: "torture", version: "1" },
  machine: "run@2",
  input: {},
});
const ARGS = { label: "t0-pay", amount: 100 };
const EDIT = { label: "t0-pay", amount: 42 };
const intended = (runId: string, attempt: number, args: unknown = ARGS): Ev => ({
  type: "call.intended",
  runId,
  callId: `${runId}/0`,
  seq: 0,
  attempt,
  kind: "tool",
  name: "pay",
  args,
  fingerprint: "f",
  disposition: "effect",
  pin: null,
  reconciler: null,
  idempotencyKey: `${runId}/0#${attempt}`,
  ...(attempt === 1 ? { approval: { editable: true, description: "pays" } } : {}),
});
const waiting = (runId: string): Ev => ({
  type: "run.waiting",
  runId,
  wait: "approval",
  callId: `${runId}/0`,
});
const decided = (runId: string, decision: "approved" | "denied", args?: unknown): Ev => ({
  type: "approval.recorded",
  runId,
  callId: `${runId}/0`,
  decision,
  basedOnVersion: 3,
  decidedBy: "torture-harness",
  note: decision === "denied" || args !== undefined ? "because" : "",
  ...(args === undefined ? {} : { args, argsDigest: "a" }),
});
const woken = (runId: string): Ev => ({
  type: "run.woken",
  runId,
  wait: "approval",
  callId: `${runId}/0`,
  firedAt: "2026-12-05T04:00:00.000Z",
  by: "w1",
});
const completed = (runId: string, attempt: number): Ev => ({
  type: "call.completed",
  runId,
  callId: `${runId}/0`,
  attempt,
  result: { paid: 100 },
  resultDigest: "d",
});
const failed = (runId: string): Ev => ({
  type: "call.failed",
  runId,
  callId: `${runId}/0`,
  attempt: 1,
  definite: true,
  error: { name: "ApprovalDenied", message: "denied" },
});
const runCompleted = (runId: string): Ev => ({ type: "run.completed", runId, output: {}, outputDigest: "d" });
const log = (...events: Ev[]): RecordedEvent[] =>
  events.map(
    (event, i) =>
      ({ streamId: `run-${event.runId}`, version: i + 1, recordedAt: "", event }) as unknown as RecordedEvent,
  );
const effect = (amount: number, attempt = 2, runId = "a"): ApprovalEffect => ({
  label: "t0-pay",
  amount,
  key: `${runId}/0#${attempt}`,
});
const seen = (...effects: ApprovalEffect[]) => ({ signals: [], approvalEffects: effects });

const approvedRun = (args?: unknown) =>
  log(
    admitted("a"),
    intended("a", 1),
    waiting("a"),
    decided("a", "approved", args),
    woken("a"),
    intended("a", 2, args ?? ARGS),
    completed("a", 2),
    runCompleted("a"),
  );

describe("the torture's approval check", () => {
  it("passes an approved call that ran once after its approval, an edited one with the edit, and a denied one", () => {
    const plain = checkApproval(approvedRun(), seen(effect(100)));
    expect(plain.problems).toEqual([]);
    expect(plain.counts).toMatchObject({ awaited: 1, approved: 1, effects: 1, finished: 1 });
    const edited = checkApproval(approvedRun(EDIT), seen(effect(42)));
    expect(edited.problems).toEqual([]);
    expect(edited.counts).toMatchObject({ edited: 1 });
    const denied = checkApproval(
      log(
        admitted("a"),
        intended("a", 1),
        waiting("a"),
        decided("a", "denied"),
        woken("a"),
        failed("a"),
        runCompleted("a"),
      ),
      seen(),
    );
    expect(denied.problems).toEqual([]);
    expect(denied.counts).toMatchObject({ denied: 1, effects: 0 });
  });

  it("fails an effect before its approval: an attempt intended first, or a witness line of the awaiting attempt", () => {
    const early = log(
      admitted("a"),
      intended("a", 1),
      intended("a", 2),
      decided("a", "approved"),
      completed("a", 2),
      runCompleted("a"),
    );
    expect(checkApproval(early, seen(effect(100))).problems.join()).toMatch(/intended before its approval/);
    expect(checkApproval(approvedRun(), seen(effect(100, 1))).problems.join()).toMatch(
      /not an attempt intended after its approval/,
    );
    const undecided = log(admitted("a"), intended("a", 1), waiting("a"));
    expect(checkApproval(undecided, seen(effect(100))).problems.join()).toMatch(/without an approval/);
  });

  it("fails a duplicate effect, a denied call that ran, an edit not applied, a run left waiting", () => {
    expect(checkApproval(approvedRun(), seen(effect(100), effect(100))).problems.join()).toMatch(
      /witnessed 2 times/,
    );
    const deniedRan = log(
      admitted("a"),
      intended("a", 1),
      waiting("a"),
      decided("a", "denied"),
      intended("a", 2),
    );
    const d = checkApproval(deniedRan, seen(effect(100))).problems.join();
    expect(d).toMatch(/the call was denied/);
    expect(d).toMatch(/without an approval/);
    const notApplied = log(
      admitted("a"),
      intended("a", 1),
      waiting("a"),
      decided("a", "approved", EDIT),
      intended("a", 2, ARGS),
    );
    expect(checkApproval(notApplied, seen()).problems.join()).toMatch(/ran with .*approved/);
    expect(checkApproval(approvedRun(EDIT), seen(effect(100))).problems.join()).toMatch(/paid 100/);
    const left = log(admitted("a"), intended("a", 1), waiting("a"));
    expect(checkApproval(left, seen()).problems.join()).toMatch(/left waiting/);
    expect(checkApproval(approvedRun(), seen(effect(100, 2, "b"))).problems.join()).toMatch(/never awaited/);
  });
});
