import { describe, expect, it } from "vitest";
import { MODEL_NAME } from "../support/ai-agent.js";
import { useTempDir } from "../support/tmp.js";
import { count, crashAndRecover, eventsOf, intents, type Mode, modelCalls, versionOf } from "./given.js";

const tempDir = useTempDir();

const MODES: ReadonlyArray<Mode> = ["generate", "stream"];
const DONE = { text: "Booked your flight to Paris. Have a good trip!", steps: 3 };
const TIMESTAMPS = ["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"];

/** Every crash scenario below kills the process in the second model call (after the lookup ran). */
const inSecondModelCall = { crashCall: MODEL_NAME, skip: 1 };

describe.each(MODES)("holdfast/ai after a SIGKILL, %s", (mode) => {
  it("killed after the model's outcome: re-execution serves the recorded results and asks the model nothing again", async () => {
    const r = await crashAndRecover(tempDir(), { mode, crashAt: "after-outcome", ...inSecondModelCall });
    expect(r.witnessedBeforeRecovery).toEqual([`model:${mode}:1`, "tool:lookup:Paris", `model:${mode}:2`]);
    expect(r.report.resumed).toEqual([r.runId]);
    expect(r.results).toEqual([
      expect.objectContaining({ status: "completed", output: expect.objectContaining(DONE) }),
    ]);
    // Recorded dates come back as dates: the agent read them with toISOString().
    expect(r.results[0]).toMatchObject({ output: { timestamps: TIMESTAMPS } });
    expect([1, 2, 3].map((step) => count(r.witness, `model:${mode}:${step}`))).toEqual([1, 1, 1]);
    expect(count(r.witness, "tool:lookup:Paris")).toBe(1);
    expect(count(r.witness, "tool:book:HF-501")).toBe(1);
    await r.runtime.close();
  });

  it("killed before the model call's intent: nothing of it is recorded, so re-execution asks the model once", async () => {
    const r = await crashAndRecover(tempDir(), { mode, crashAt: "before-intent", ...inSecondModelCall });
    expect(r.witnessedBeforeRecovery).toEqual([`model:${mode}:1`, "tool:lookup:Paris"]);
    expect(r.results).toEqual([
      expect.objectContaining({ status: "completed", output: expect.objectContaining(DONE) }),
    ]);
    expect([1, 2, 3].map((step) => count(r.witness, `model:${mode}:${step}`))).toEqual([1, 1, 1]);
    expect(count(r.witness, "tool:lookup:Paris")).toBe(1);
    await r.runtime.close();
  });

  for (const crashAt of ["after-intent", "after-effect-before-outcome"]) {
    it(`killed ${crashAt}: the model call is in doubt and holds the run; a person's decision lets it go on`, async () => {
      const r = await crashAndRecover(tempDir(), { mode, crashAt, ...inSecondModelCall });
      const asked = crashAt === "after-intent" ? 0 : 1;
      expect(count(r.witness, `model:${mode}:2`)).toBe(asked);
      const callId = `${r.runId}/2`;
      expect(r.report.held).toEqual([
        { runId: r.runId, reasons: [expect.objectContaining({ code: "in-doubt", callId })] },
      ]);
      expect(r.results).toEqual([]);
      // Recovery asked nobody anything.
      expect(modelCalls(r.witness)).toBe(1 + asked);
      const decided = await r.runtime.decide(r.runId, {
        basedOnVersion: await versionOf(r.runtime, r.runId),
        decidedBy: "ada",
        decision: "confirmed-not-completed",
        note: "the provider's log has no such request",
      });
      expect(await decided.result).toMatchObject({ status: "completed", output: DONE });
      expect([1, 2, 3].map((step) => count(r.witness, `model:${mode}:${step}`))).toEqual([1, asked + 1, 1]);
      expect(count(r.witness, "tool:lookup:Paris")).toBe(1);
      await r.runtime.close();
    });

    it(`killed ${crashAt} with the model's policy inDoubt: "replay": the call is authorized and asked again`, async () => {
      const r = await crashAndRecover(tempDir(), {
        mode,
        crashAt,
        ...inSecondModelCall,
        policy: { inDoubt: "replay" },
      });
      const callId = `${r.runId}/2`;
      expect(r.report.replayed).toEqual([callId]);
      expect(r.results).toEqual([
        expect.objectContaining({ status: "completed", output: expect.objectContaining(DONE) }),
      ]);
      const events = await eventsOf(r.runtime, r.runId);
      expect(events).toContainEqual({
        type: "call.replay-authorized",
        runId: r.runId,
        callId,
        attempt: 1,
        reason: "model-policy",
      });
      expect(
        intents(events)
          .filter((e) => e.callId === callId)
          .map((e) => [e.attempt, e.disposition]),
      ).toEqual([
        [1, "replay"],
        [2, "replay"],
      ]);
      const asked = crashAt === "after-intent" ? 0 : 1;
      expect([1, 2, 3].map((step) => count(r.witness, `model:${mode}:${step}`))).toEqual([1, asked + 1, 1]);
      expect(count(r.witness, "tool:lookup:Paris")).toBe(1);
      await r.runtime.close();
    });
  }

  it("killed in the middle of a tool call: the tool call holds the run and is never repeated; the model is not asked again", async () => {
    const r = await crashAndRecover(tempDir(), {
      mode,
      crashAt: "after-effect-before-outcome",
      crashCall: "book",
    });
    expect(r.witnessedBeforeRecovery).toEqual([
      `model:${mode}:1`,
      "tool:lookup:Paris",
      `model:${mode}:2`,
      "tool:book:HF-501",
    ]);
    const callId = `${r.runId}/3`;
    expect(r.report.held).toEqual([
      { runId: r.runId, reasons: [expect.objectContaining({ code: "in-doubt", callId })] },
    ]);
    const decided = await r.runtime.decide(r.runId, {
      basedOnVersion: await versionOf(r.runtime, r.runId),
      decidedBy: "ada",
      decision: "confirmed-completed",
      note: "the booking is in the airline's system",
      result: { booked: "HF-501", confirmation: "CONF-HF-501", toolCallId: "call-book-1" },
    });
    expect(await decided.result).toMatchObject({ status: "completed", output: DONE });
    expect(count(r.witness, "tool:book:HF-501")).toBe(1);
    expect([1, 2, 3].map((step) => count(r.witness, `model:${mode}:${step}`))).toEqual([1, 1, 1]);
    expect(await eventsOf(r.runtime, r.runId)).toContainEqual(
      expect.objectContaining({
        type: "decision.recorded",
        calls: [expect.objectContaining({ callId, decision: "confirmed-completed" })],
      }),
    );
    await r.runtime.close();
  });
});
