import { describe, expect, it } from "vitest";
import type { RecordedEvent } from "../../src/events/index.js";
import { checkSignal, checkSleep, type SignalSent, sumKindChecks } from "../../torture/check-waits.js";

/**
 * The sleep and signal kinds' checks on hand-made journals (decision 0064): each law they enforce
 * is seen to fail here; the torture slices show them passing on real runs.
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
const waitIntended = (runId: string, seq: number, name: "sleep" | "waitFor"): Ev => ({
  type: "call.intended",
  runId,
  callId: `${runId}/${seq}`,
  seq,
  attempt: 1,
  kind: "wait",
  name,
  args: name === "sleep" ? { ms: 500 } : { name: "go", timeoutMs: 2500 },
  fingerprint: "f",
  disposition: "replay",
  pin: null,
  reconciler: null,
  idempotencyKey: `${runId}/${seq}#1`,
});
const DUE = "2026-12-05T03:00:00.500Z";
const waiting = (
  runId: string,
  seq: number,
  wait: "timer" | "signal" = "timer",
  dueAt: string | undefined = DUE,
): Ev => ({
  type: "run.waiting",
  runId,
  wait,
  callId: `${runId}/${seq}`,
  ...(dueAt === undefined ? {} : { dueAt }),
  ...(wait === "signal" ? { name: "go" } : {}),
});
const woken = (runId: string, seq: number, firedAt: string, wait: "timer" | "signal" = "timer"): Ev => ({
  type: "run.woken",
  runId,
  wait,
  callId: `${runId}/${seq}`,
  dueAt: DUE,
  firedAt,
  by: "w1",
});
const completed = (runId: string, seq: number, result: unknown = null): Ev => ({
  type: "call.completed",
  runId,
  callId: `${runId}/${seq}`,
  attempt: 1,
  result,
  resultDigest: "d",
});
const received = (runId: string, signalId: string, wakes?: string): Ev => ({
  type: "signal.received",
  runId,
  signalId,
  name: "go",
  payload: { trial: "t0" },
  payloadDigest: "p",
  by: "torture-harness",
  ...(wakes === undefined ? {} : { wakes }),
});
const consumed = (runId: string, signalId: string, seq: number): Ev => ({
  type: "signal.consumed",
  runId,
  signalId,
  name: "go",
  callId: `${runId}/${seq}`,
});
const runCompleted = (runId: string): Ev => ({ type: "run.completed", runId, output: {}, outputDigest: "d" });
const taken = (signalId: string) => ({ timedOut: false, signalId, payload: { trial: "t0" } });
const TIMED_OUT = { timedOut: true };

/** A journal of [streamId, event, recordedAt?] entries, versions counted per stream. */
const log = (...entries: ReadonlyArray<readonly [string, Ev, string?]>): RecordedEvent[] => {
  const versions = new Map<string, number>();
  return entries.map(([streamId, event, recordedAt]) => {
    const version = (versions.get(streamId) ?? 0) + 1;
    versions.set(streamId, version);
    return { streamId, version, recordedAt: recordedAt ?? "", event } as unknown as RecordedEvent;
  });
};
const run = (runId: string, ...events: Ev[]) => events.map((e) => [`run-${runId}`, e] as const);
const LATER = "2026-12-05T03:00:00.700Z";

describe("the torture's sleep check", () => {
  it("passes a run that slept, was woken once after its due time, and completed", () => {
    const events = log(
      ...run("a", admitted("a"), waitIntended("a", 0, "sleep"), waiting("a", 0)),
      ["run-a", woken("a", 0, LATER), LATER],
      ...run("a", completed("a", 0), runCompleted("a")),
    );
    const check = checkSleep(events);
    expect(check.problems).toEqual([]);
    expect(check.counts).toMatchObject({
      sleeps: 1,
      parked: 1,
      woken: 1,
      runsFinished: 1,
      latestWakeMs: 200,
    });
  });

  it("finds a timer fired twice", () => {
    const events = log(
      ...run(
        "a",
        admitted("a"),
        waitIntended("a", 0, "sleep"),
        waiting("a", 0),
        woken("a", 0, LATER),
        completed("a", 0),
        woken("a", 0, LATER),
        completed("a", 0),
        runCompleted("a"),
      ),
    );
    const { problems } = checkSleep(events);
    expect(problems).toContain("run-a: a/0 woken 2 times (a timer fired twice)");
    expect(problems).toContain("run-a: the wait a/0 completed 2 times");
  });

  it("finds a timer fired before its due time, by the waker's clock and by the commit's stamp", () => {
    const early = "2026-12-05T03:00:00.300Z";
    const events = log(
      ...run("a", admitted("a"), waitIntended("a", 0, "sleep"), waiting("a", 0)),
      ["run-a", woken("a", 0, early), early],
      ...run("a", completed("a", 0), runCompleted("a")),
    );
    const { problems } = checkSleep(events);
    expect(problems).toContain(`run-a: a/0 fired at ${early}, before its due time ${DUE}`);
    expect(problems).toContain(`run-a: a/0 woken in a commit of ${early}, before its due time ${DUE}`);
  });

  it("finds a commit stamped before the due time even when the waker's clock says after", () => {
    const events = log(
      ...run("a", admitted("a"), waitIntended("a", 0, "sleep"), waiting("a", 0)),
      ["run-a", woken("a", 0, LATER), "2026-12-05T03:00:00.100Z"],
      ...run("a", completed("a", 0), runCompleted("a")),
    );
    expect(checkSleep(events).problems).toEqual([
      `run-a: a/0 woken in a commit of 2026-12-05T03:00:00.100Z, before its due time ${DUE}`,
    ]);
  });

  it("finds a timer lost: parked and never woken, the run left waiting", () => {
    const events = log(...run("a", admitted("a"), waitIntended("a", 0, "sleep"), waiting("a", 0)));
    const { problems } = checkSleep(events);
    expect(problems).toContain("run-a: the wait a/0 never completed (lost), the run is waiting");
    expect(problems).toContain("run-a: a/0 parked and never woken, the run is waiting");
    expect(problems).toContain("run-a: it waited and did not finish: it is waiting");
  });

  it("finds a wake-up with no due time recorded, and a wait parked again after its wake-up", () => {
    const events = log(
      ...run(
        "a",
        admitted("a"),
        waitIntended("a", 0, "sleep"),
        woken("a", 0, LATER),
        waiting("a", 0),
        completed("a", 0),
        runCompleted("a"),
      ),
    );
    const { problems } = checkSleep(events);
    expect(problems).toContain("run-a: a/0 woken with no run.waiting before it");
    expect(problems).toContain("run-a: a/0 parked again after its wake-up");
  });

  it("passes a run cancelled while it slept: not lost", () => {
    const events = log(
      ...run("a", admitted("a"), waitIntended("a", 0, "sleep"), waiting("a", 0), {
        type: "run.cancel-requested",
        runId: "a",
        by: "ada",
        note: "",
      }),
    );
    // The fold of this hand-made stream is not what matters; a run cancelled is exempt, one left waiting is not.
    const left = checkSleep(events).problems;
    expect(left.some((p) => p.includes("never completed"))).toBe(true);
    const cancelledRun = log(
      ...run(
        "a",
        admitted("a"),
        waitIntended("a", 0, "sleep"),
        waiting("a", 0),
        { type: "run.cancel-requested", runId: "a", by: "ada", note: "" },
        { type: "run.cancelled", runId: "a", by: "ada", note: "" },
      ),
    );
    expect(checkSleep(cancelledRun).problems).toEqual([]);
  });
});

describe("the torture's signal check", () => {
  const sent = (s: Partial<SignalSent> & Pick<SignalSent, "signalId" | "moment">): SignalSent => ({
    runId: "a",
    name: "go",
    accepted: true,
    recorded: true,
    ...s,
  });

  it("passes a signal sent before the wait (taken without parking), sent again, and a late one refused", () => {
    const events = log(
      ...run(
        "a",
        admitted("a"),
        received("a", "s1"),
        waitIntended("a", 0, "waitFor"),
        consumed("a", "s1", 0),
        completed("a", 0, taken("s1")),
        runCompleted("a"),
      ),
    );
    const check = checkSignal(events, {
      signals: [
        sent({ signalId: "s1", moment: "before" }),
        sent({ signalId: "s1", moment: "again", recorded: false }),
        sent({ signalId: "s9", moment: "late", accepted: false, reason: "run-ended" }),
      ],
    });
    expect(check.problems).toEqual([]);
    expect(check.counts).toMatchObject({
      recorded: 1,
      consumed: 1,
      takenWithoutParking: 1,
      timedOut: 0,
      sent: 3,
    });
  });

  it("passes a parked wait woken by its signal, and one that timed out after its due time", () => {
    const events = log(
      ...run(
        "a",
        admitted("a"),
        waitIntended("a", 0, "waitFor"),
        waiting("a", 0, "signal"),
        received("a", "s1", "a/0"),
      ),
      ...run("a", consumed("a", "s1", 0), woken("a", 0, "2026-12-05T03:00:00.100Z", "signal")),
      ...run("a", completed("a", 0, taken("s1")), runCompleted("a")),
      ...run("b", admitted("b"), waitIntended("b", 0, "waitFor"), waiting("b", 0, "signal")),
      ...run("b", woken("b", 0, LATER, "signal"), completed("b", 0, TIMED_OUT), runCompleted("b")),
    );
    const check = checkSignal(events, { signals: [sent({ signalId: "s1", moment: "parked" })] });
    expect(check.problems).toEqual([]);
    expect(check.counts).toMatchObject({ consumed: 1, timedOut: 1, woken: 2, parked: 2 });
  });

  it("finds a signal consumed twice, one recorded twice, and one consumed that was never recorded", () => {
    const events = log(
      ...run(
        "a",
        admitted("a"),
        received("a", "s1"),
        received("a", "s1"),
        waitIntended("a", 0, "waitFor"),
        consumed("a", "s1", 0),
        completed("a", 0, taken("s1")),
        waitIntended("a", 1, "waitFor"),
        consumed("a", "s1", 1),
        completed("a", 1, taken("s1")),
        waitIntended("a", 2, "waitFor"),
        consumed("a", "s2", 2),
        completed("a", 2, taken("s2")),
        runCompleted("a"),
      ),
    );
    const { problems } = checkSignal(events, { signals: [] });
    expect(problems).toContain("run-a: signal s1 recorded twice");
    expect(problems).toContain("run-a: signal s1 consumed twice (a/0, a/1)");
    expect(problems).toContain("run-a: signal s2 consumed, never recorded before");
  });

  it("finds a timeout while a signal of its name was recorded and not taken", () => {
    const events = log(
      ...run(
        "a",
        admitted("a"),
        waitIntended("a", 0, "waitFor"),
        waiting("a", 0, "signal"),
        received("a", "s1"),
      ),
      ...run("a", woken("a", 0, LATER, "signal"), completed("a", 0, TIMED_OUT), runCompleted("a")),
    );
    expect(checkSignal(events, { signals: [] }).problems).toContain(
      "run-a: a/0 timed out with signal s1 recorded and not taken",
    );
  });

  it("finds a wait that returned another signal than it took, and a timeout that took one", () => {
    const events = log(
      ...run(
        "a",
        admitted("a"),
        received("a", "s1"),
        received("a", "s2"),
        waitIntended("a", 0, "waitFor"),
        consumed("a", "s1", 0),
        completed("a", 0, taken("s2")),
        waitIntended("a", 1, "waitFor"),
        consumed("a", "s2", 1),
        completed("a", 1, TIMED_OUT),
        runCompleted("a"),
      ),
    );
    const { problems } = checkSignal(events, { signals: [] });
    expect(problems).toContain("run-a: a/0 returned signal s2, it took s1");
    expect(problems).toContain("run-a: a/1 timed out, yet took signal s2");
  });

  it("finds a signal a timeout-less wait never got (lost: left waiting)", () => {
    const events = log(
      ...run("a", admitted("a"), waitIntended("a", 0, "waitFor"), waiting("a", 0, "signal", undefined)),
    );
    const { problems } = checkSignal(events, { signals: [] });
    expect(problems).toContain("run-a: it waited and did not finish: it is waiting");
  });

  it("finds an accepted signal missing from the stream, a second send that wrote again, a late one accepted", () => {
    const events = log(
      ...run("a", admitted("a"), waitIntended("a", 0, "waitFor"), waiting("a", 0, "signal")),
      ...run("a", woken("a", 0, LATER, "signal"), completed("a", 0, TIMED_OUT), runCompleted("a")),
    );
    const { problems } = checkSignal(events, {
      signals: [
        sent({ signalId: "s1", moment: "parked" }),
        sent({ signalId: "s1", moment: "again", recorded: true }),
        sent({ signalId: "s9", moment: "late", accepted: true }),
        sent({ signalId: "s8", moment: "before", accepted: false, reason: "signal-id-conflict" }),
      ],
    });
    expect(problems).toContain("signal s1 sent parked to a: accepted, not in the run's stream (lost)");
    expect(problems).toContain("signal s1 sent again to a: the second send of its id wrote it again");
    expect(problems).toContain("signal s9 sent late to a: accepted, the run had ended");
    expect(problems).toContain(
      "signal s8 sent before to a: refused (signal-id-conflict), the run is completed",
    );
  });

  it("adds trials up, the latest wake-up the largest, problems named by trial", () => {
    const sum = sumKindChecks([
      { trial: 1, check: { counts: { woken: 2, latestWakeMs: 40 }, problems: ["x"] } },
      { trial: 2, check: { counts: { woken: 3, latestWakeMs: 30 }, problems: [] } },
    ]);
    expect(sum).toEqual({ counts: { woken: 5, latestWakeMs: 40 }, problems: ["trial 1: x"] });
  });
});
