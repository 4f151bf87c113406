import { FastCheck as fc } from "effect";
import { describe, expect, it } from "vitest";
import { transition } from "xstate";
import type { AnyEvent } from "../../src/events/index.js";
import {
  emptyFold,
  foldRun,
  RUN_MACHINE_V1,
  RUN_MACHINE_V2,
  type RunFold,
  statusOf,
  step,
  TransitionRejected,
} from "../../src/machines/index.js";

const D = "d".repeat(64);
const runId = "r1";

type Op = "ok" | "fail" | "checkpoint" | "conflict" | "interrupt" | "heldStop" | "heldDecide";

/** A valid run stream built from a list of operations, for one machine version. */
const streamOf = (
  ops: ReadonlyArray<Op>,
  end: "completed" | "failed" | "open",
  machine: string = RUN_MACHINE_V2,
): AnyEvent[] => {
  const events: AnyEvent[] = [
    {
      type: "run.admitted",
      runId,
      chatId: "c",
      inputId: "i",
      inputDigest: D,
      agent: { name: "a", version: "1" },
      machine,
      input: null,
    },
  ];
  let seq = 0;
  const intent = (): AnyEvent => ({
    type: "call.intended",
    runId,
    callId: `${runId}/${seq}`,
    seq,
    attempt: 1,
    kind: "tool",
    name: "t",
    args: { seq },
    fingerprint: D,
    disposition: "hold",
    pin: null,
    reconciler: null,
    idempotencyKey: `${runId}/${seq}#1`,
  });
  let stopped = false;
  for (const op of ops) {
    if (stopped) break;
    const callId = `${runId}/${seq}`;
    switch (op) {
      case "ok":
        events.push(intent(), {
          type: "call.completed",
          runId,
          callId,
          attempt: 1,
          result: seq,
          resultDigest: D,
        });
        seq++;
        break;
      case "fail":
        events.push(intent(), {
          type: "call.failed",
          runId,
          callId,
          attempt: 1,
          definite: true,
          error: { name: "E", message: "no" },
        });
        seq++;
        break;
      case "checkpoint":
        events.push({
          type: "checkpoint.saved",
          runId,
          chatId: "c",
          afterSeq: seq - 1,
          state: { seq },
          digest: D,
        });
        break;
      case "conflict":
        events.push({
          type: "conflict.recorded",
          runId,
          kind: "outcome",
          detail: "x",
          recorded: 1,
          attempted: 2,
        });
        break;
      case "interrupt":
        events.push(
          { type: "run.interrupted", runId, detectedBy: "w", inDoubt: [] },
          { type: "run.resumed", runId, by: "w" },
        );
        break;
      case "heldDecide":
      case "heldStop": {
        events.push(intent(), {
          type: "run.held",
          runId,
          reasons: [{ code: "in-doubt", callId, detail: "no outcome" }],
        });
        const basedOnVersion = events.length;
        events.push({
          type: "decision.recorded",
          runId,
          basedOnVersion,
          decidedBy: "ops",
          calls: [
            op === "heldStop"
              ? { callId, decision: "stop", note: "checked the remote side" }
              : { callId, decision: "confirmed-completed", note: "checked the remote side", result: "ok" },
          ],
          run: op === "heldStop" ? "stop" : "continue",
          note: "checked the remote side",
        });
        // From run@2 the decision is followed by what becomes of the run.
        if (machine === RUN_MACHINE_V2)
          events.push(
            op === "heldStop"
              ? { type: "run.stopped", runId, reason: "decided" }
              : { type: "run.resumed", runId, by: "ops" },
          );
        seq++;
        if (op === "heldStop") stopped = true;
        break;
      }
    }
  }
  if (!stopped && end === "completed")
    events.push({ type: "run.completed", runId, output: seq, outputDigest: D });
  if (!stopped && end === "failed")
    events.push({ type: "run.failed", runId, error: { name: "E", message: "x" } });
  return events;
};

const arbitraryStream = (machine: string) =>
  fc
    .tuple(
      fc.array(
        fc.constantFrom<Op>("ok", "fail", "checkpoint", "conflict", "interrupt", "heldStop", "heldDecide"),
        {
          maxLength: 25,
        },
      ),
      fc.constantFrom<"completed" | "failed" | "open">("completed", "failed", "open"),
    )
    .map(([ops, end]) => streamOf(ops, end, machine));

const decisionAt = (events: ReadonlyArray<AnyEvent>): number =>
  events.findIndex((e) => e.type === "decision.recorded");

describe.each([RUN_MACHINE_V1, RUN_MACHINE_V2])("run machine %s fold", (machine) => {
  it("fold from zero equals fold from any prefix snapshot plus the rest", () => {
    fc.assert(
      fc.property(arbitraryStream(machine), fc.nat(), (events, cut) => {
        const whole = foldRun(events);
        const k = 1 + (cut % events.length);
        const resumed =
          k === events.length ? foldRun(events) : foldRun(events.slice(k), foldRun(events.slice(0, k)));
        expect(resumed.snapshot.value).toEqual(whole.snapshot.value);
        expect(resumed.snapshot.context).toEqual(whole.snapshot.context);
        expect(whole.snapshot.context.version).toBe(events.length);
      }),
      { numRuns: 300 },
    );
  });

  it("an outcome for a call with no intent is refused by the machine", () => {
    const events = streamOf([], "open", machine);
    expect(() =>
      foldRun([
        ...events,
        { type: "call.completed", runId, callId: `${runId}/0`, attempt: 1, result: 1, resultDigest: D },
      ]),
    ).toThrow(TransitionRejected);
  });

  it("a second outcome for a closed call is refused by the machine", () => {
    const events = streamOf(["ok"], "open", machine);
    const again = events[2]!;
    expect(() => foldRun([...events, again])).toThrow(TransitionRejected);
  });

  it("a run cannot complete while a call is in doubt", () => {
    const events = streamOf(["ok"], "open", machine);
    const intent = {
      ...(events[1] as Extract<AnyEvent, { type: "call.intended" }>),
      seq: 1,
      callId: `${runId}/1`,
    };
    expect(() =>
      foldRun([...events, intent, { type: "run.completed", runId, output: 1, outputDigest: D }]),
    ).toThrow(/not accepted in state "running"/);
  });

  it("a decision made on a stale version is refused (law 9)", () => {
    const events = streamOf(["heldDecide"], "open", machine);
    const at = decisionAt(events);
    const decision = events[at] as Extract<AnyEvent, { type: "decision.recorded" }>;
    expect(() =>
      foldRun([...events.slice(0, at), { ...decision, basedOnVersion: decision.basedOnVersion - 1 }]),
    ).toThrow(TransitionRejected);
    expect(statusOf(foldRun(events))).toBe("running");
  });

  it("a confirmation without a note is refused (law 9)", () => {
    const events = streamOf(["heldDecide"], "open", machine);
    const at = decisionAt(events);
    const decision = events[at] as Extract<AnyEvent, { type: "decision.recorded" }>;
    const unexplained = { ...decision, calls: decision.calls.map((c) => ({ ...c, note: "  " })) };
    expect(() => foldRun([...events.slice(0, at), unexplained])).toThrow(TransitionRejected);
  });

  it("intents must take the next seq in program order", () => {
    const events = streamOf(["ok"], "open", machine);
    const skip = {
      ...(events[1] as Extract<AnyEvent, { type: "call.intended" }>),
      seq: 5,
      callId: `${runId}/5`,
    };
    expect(() => foldRun([...events, skip])).toThrow(TransitionRejected);
  });

  it("step accepts exactly the events snapshot.can accepts, and reaches the state xstate's transition reaches", () => {
    // Every event of a valid stream, offered in a shuffled order against the fold so far: most are
    // refused somewhere, which exercises the refusals of every state.
    fc.assert(
      fc.property(arbitraryStream(machine), fc.array(fc.nat(), { maxLength: 60 }), (events, picks) => {
        let fold: RunFold = emptyFold(machine);
        const offers = [...events, ...picks.map((p) => events[p % events.length]!)];
        for (const event of offers) {
          const can = fold.snapshot.can(event);
          let next: RunFold | null = null;
          try {
            next = step(fold, event);
          } catch (error) {
            expect(error).toBeInstanceOf(TransitionRejected);
          }
          expect(next !== null).toBe(can);
          if (next) {
            const [reference] = transition(fold.machine, fold.snapshot, event);
            expect(next.snapshot.value).toEqual(reference.value);
            expect(next.snapshot.context).toEqual(reference.context);
            fold = next;
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
