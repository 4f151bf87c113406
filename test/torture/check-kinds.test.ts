import { describe, expect, it } from "vitest";
import type { RecordedEvent } from "../../src/events/index.js";
import { NOT_STARTED_CONTROL_EVIDENCE } from "../../src/runtime/attempt.js";
import { type CancelAsked, checkCancel, checkPause, checkQueue } from "../../torture/check-kinds.js";

/**
 * The cancel, queue and pause kinds' checks on hand-made journals: each law they enforce is seen
 * to fail (the torture slice shows them passing on real runs).
 */
type Ev = Record<string, unknown>;
const admitted = (runId: string, inputId: string, chatId = "torture"): Ev => ({
  type: "run.admitted",
  runId,
  chatId,
  inputId,
  inputDigest: "d",
  agent: { name: "torture", version: "1" },
  machine: "run@2",
  input: {},
});
const intended = (runId: string, seq: number, attempt = 1): Ev => ({
  type: "call.intended",
  runId,
  callId: `${runId}/${seq}`,
  seq,
  attempt,
  kind: "tool",
  name: "send",
  args: {},
  fingerprint: "f",
  disposition: "hold",
  pin: null,
  reconciler: null,
  idempotencyKey: `${runId}/${seq}#${attempt}`,
});
const completed = (runId: string, seq: number, attempt = 1): Ev => ({
  type: "call.completed",
  runId,
  callId: `${runId}/${seq}`,
  attempt,
  result: {},
  resultDigest: "d",
});
const cancelRequested = (runId: string): Ev => ({
  type: "run.cancel-requested",
  runId,
  by: "torture-harness",
  note: "",
});
const cancelled = (runId: string): Ev => ({ type: "run.cancelled", runId, by: "torture-harness", note: "" });
const runCompleted = (runId: string): Ev => ({ type: "run.completed", runId, output: {}, outputDigest: "d" });
const pauseRequested = (runId: string): Ev => ({
  type: "run.pause-requested",
  runId,
  by: "torture-harness",
  note: "",
});
const paused = (runId: string): Ev => ({ type: "run.paused", runId });
const resumed = (runId: string, by = "torture-harness"): Ev => ({ type: "run.resumed", runId, by });
const queued = (inputId: string): Ev => ({
  type: "input.queued",
  chatId: "torture",
  inputId,
  inputDigest: "d",
  agent: { name: "torture-queued", version: "1" },
  input: {},
});
const admittedFromQueue = (inputId: string, runId: string): Ev => ({
  type: "input.admitted",
  chatId: "torture",
  inputId,
  runId,
});

/** A journal of [streamId, event] pairs, versions counted per stream. */
const log = (...entries: ReadonlyArray<readonly [string, Ev]>): RecordedEvent[] => {
  const versions = new Map<string, number>();
  return entries.map(([streamId, event]) => {
    const version = (versions.get(streamId) ?? 0) + 1;
    versions.set(streamId, version);
    return { streamId, version, recordedAt: "", event } as unknown as RecordedEvent;
  });
};
const run = (runId: string, ...events: Ev[]) => events.map((e) => [`run-${runId}`, e] as const);
const asked = (status: string, accepted = true): CancelAsked[] => [
  { runId: "a", kill: "after", accepted, status },
];

describe("the torture's cancel check", () => {
  it("passes a run cancelled after its in-flight call settled, the witness seeing that call only", () => {
    const events = log(
      ...run(
        "a",
        admitted("a", "trial"),
        intended("a", 0),
        cancelRequested("a"),
        completed("a", 0),
        cancelled("a"),
      ),
    );
    const check = checkCancel(events, ["a/0#1"], asked("cancel-requested"));
    expect(check.problems).toEqual([]);
    expect(check).toMatchObject({
      cancelsRequested: 1,
      requestsCommitted: 1,
      cancelledEnded: 1,
      killedAfterRequest: 1,
    });
  });

  it("finds a call intended after the cancel request, and the witness seeing its effect", () => {
    const events = log(
      ...run(
        "a",
        admitted("a", "trial"),
        intended("a", 0),
        cancelRequested("a"),
        completed("a", 0),
        intended("a", 1),
        completed("a", 1),
        cancelled("a"),
      ),
    );
    const check = checkCancel(events, ["a/0#1", "a/1#1"], asked("cancel-requested"));
    expect(check.problems).toEqual([
      "run-a: a/1 attempt 1 intended after the cancel request, not closed unstarted",
      "a/1#1: the witness saw the effect of an attempt intended after the cancel",
    ]);
  });

  it("finds an effect the journal never intended, a run asked to cancel that did not end cancelled, and an accepted cancel with no request", () => {
    const stillRunning = log(...run("a", admitted("a", "trial"), intended("a", 0), cancelRequested("a")));
    expect(checkCancel(stillRunning, ["a/5#1"], asked("cancel-requested")).problems).toEqual([
      "run-a: asked to cancel, it is running",
      "a/5#1: the witness saw its effect, the journal never intended it",
    ]);
    const noRequest = log(
      ...run("a", admitted("a", "trial"), intended("a", 0), completed("a", 0), runCompleted("a")),
    );
    expect(checkCancel(noRequest, [], asked("cancel-requested")).problems).toEqual([
      "cancel of a accepted (cancel-requested), no run.cancel-requested in the journal",
    ]);
    // Refused because the run had ended: the answer said so, nothing to find.
    expect(checkCancel(noRequest, [], asked("completed", false))).toMatchObject({
      endedFirst: 1,
      problems: [],
    });
  });
});

describe("the torture's queue check", () => {
  const inputs = ["trial", "q1", "q2", "q3"];
  const drained = [
    ...run("a", admitted("a", "trial")),
    ["queue-torture", queued("q1")] as const,
    ["queue-torture", queued("q2")] as const,
    ...run("b", admitted("b", "q1")),
    ["queue-torture", admittedFromQueue("q1", "b")] as const,
    ...run("c", admitted("c", "q2")),
    ["queue-torture", admittedFromQueue("q2", "c")] as const,
    // q3 came after a restart, the chat free: admitted directly.
    ...run("d", admitted("d", "q3")),
  ];

  it("passes inputs admitted once each, in submission order", () => {
    const check = checkQueue(log(...drained), "torture", inputs);
    expect(check.problems).toEqual([]);
    expect(check).toMatchObject({ queued: 2, queuedAdmitted: 2, admittedDirectly: 1 });
  });

  it("finds an input admitted out of order, one admitted twice, one lost, one left queued", () => {
    const swapped = [drained[0]!, drained[1]!, drained[2]!, ...drained.slice(5, 7), ...drained.slice(3, 5)];
    expect(checkQueue(log(...swapped), "torture", ["trial", "q1", "q2"]).problems).toEqual([
      "admitted in the order trial, q2, q1; submitted trial, q1, q2",
      "admitted from the queue as q2, q1, queued as q1, q2",
    ]);
    expect(checkQueue(log(...drained, ...run("e", admitted("e", "q3"))), "torture", inputs).problems).toEqual(
      ["q3: admitted 2 times", "admitted in the order trial, q1, q2, q3, q3; submitted trial, q1, q2, q3"],
    );
    expect(checkQueue(log(...drained.slice(0, 5)), "torture", inputs).problems).toEqual([
      "q2: never admitted (lost)",
      "q3: never admitted (lost)",
      "q2: still queued at the end",
    ]);
  });
});

describe("the torture's pause check", () => {
  const seen = { stillPaused: 1, notPaused: [], killsWhilePaused: 0 };
  const parkedAndResumed = (...after: Ev[]) =>
    log(
      ...run(
        "a",
        admitted("a", "trial"),
        intended("a", 0),
        pauseRequested("a"),
        completed("a", 0),
        paused("a"),
        ...after,
      ),
    );

  it("passes a run paused with its call settled, resumed by the harness, then completed", () => {
    const check = checkPause(
      parkedAndResumed(resumed("a"), intended("a", 1), completed("a", 1), runCompleted("a")),
      ["a/0#1", "a/1#1"],
      "torture-harness",
      seen,
    );
    expect(check.problems).toEqual([]);
    expect(check).toMatchObject({ pausesRequested: 1, paused: 1, resumed: 1, stillPausedAfterRestart: 1 });
  });

  /** An intent that raced the pause request: committed after it, then closed by `close` (or not). */
  const raced = (...close: Ev[]) =>
    log(
      ...run(
        "a",
        admitted("a", "trial"),
        intended("a", 0),
        pauseRequested("a"),
        intended("a", 1),
        completed("a", 0),
        ...close,
        paused("a"),
        resumed("a"),
        runCompleted("a"),
      ),
    );
  const closedUnstarted: Ev = {
    type: "call.reconciled",
    runId: "a",
    callId: "a/1",
    attempt: 1,
    outcome: "not-completed",
    evidence: NOT_STARTED_CONTROL_EVIDENCE,
  };

  it("passes an intent that raced the pause request and was closed unstarted, no witness seeing it", () => {
    const check = checkPause(raced(closedUnstarted), ["a/0#1"], "torture-harness", seen);
    expect(check.problems).toEqual([]);
    expect(check.intentsRefused).toBe(1);
  });

  it("finds a call started while pausing, a witnessed effect of a refused one, a resume not by the harness, a resumed run left unended, a run not paused after a restart", () => {
    expect(
      checkPause(raced(completed("a", 1)), ["a/0#1", "a/1#1"], "torture-harness", seen).problems,
    ).toEqual([
      "run-a: a/1 attempt 1 intended while pausing or paused, not closed unstarted",
      "a/1#1: the witness saw the effect of an attempt intended while pausing or paused",
    ]);
    expect(checkPause(raced(closedUnstarted), ["a/1#1"], "torture-harness", seen).problems).toEqual([
      "a/1#1: the witness saw the effect of an attempt intended while pausing or paused",
    ]);
    expect(
      checkPause(parkedAndResumed(resumed("a", "recovery"), runCompleted("a")), [], "torture-harness", seen)
        .problems,
    ).toEqual(["run-a: resumed by recovery, not by the harness"]);
    expect(
      checkPause(parkedAndResumed(resumed("a"), intended("a", 1)), [], "torture-harness", seen).problems,
    ).toEqual(["run-a: resumed, and it is still running"]);
    expect(
      checkPause(parkedAndResumed(resumed("a"), runCompleted("a")), [], "torture-harness", {
        ...seen,
        notPaused: ["running (trial 3)"],
      }).problems,
    ).toEqual(["after a restart the paused run was running (trial 3)"]);
  });
});
