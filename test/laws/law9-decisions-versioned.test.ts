import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { defineAgent, defineTool, NoteRequired, openRuntime, StaleDecision } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** A run held with one call in doubt (a reset connection after send). */
const heldRun = async () => {
  const flaky = defineTool({
    name: "flaky",
    args: Schema.Struct({}),
    run: async () => {
      throw new Error("connection reset after send");
    },
  });
  const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(flaky, {}) });
  const rt = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent], tools: [flaky] });
  const run = await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: null });
  expect((await run.result).status).toBe("held");
  return { rt, runId: run.runId, version: (await rt.events(run.runId)).length };
};

describe("law 9 — decisions are versioned", () => {
  it("a decision made on a version the run has moved past is refused with StaleDecision naming the current one; nothing is written", async () => {
    const { rt, runId, version } = await heldRun();
    const stale = await rt
      .decide(runId, { basedOnVersion: version - 1, decidedBy: "ada", decision: "stop" })
      .catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(StaleDecision);
    expect(stale).toMatchObject({ basedOn: version - 1, current: version });
    expect(await rt.events(runId)).toHaveLength(version);
    await rt.close();
  });

  it("of two decisions made on the same version, exactly one is recorded", async () => {
    const { rt, runId, version } = await heldRun();
    const both = await Promise.allSettled([
      rt.decide(runId, { basedOnVersion: version, decidedBy: "ada", decision: "stop" }),
      rt.decide(runId, { basedOnVersion: version, decidedBy: "bob", decision: "resume" }),
    ]);
    expect(both.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const refused = both.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(StaleDecision);
    const decisions = (await rt.events(runId)).filter((e) => e.event.type === "decision.recorded");
    expect(decisions).toHaveLength(1);
    await rt.close();
  });

  it("a confirmation needs a note saying how the person knows, per call", async () => {
    const { rt, runId, version } = await heldRun();
    for (const decision of ["confirmed-completed", "confirmed-not-completed"] as const) {
      const refused = await rt
        .decide(runId, {
          basedOnVersion: version,
          decidedBy: "ada",
          calls: { [`${runId}/0`]: { decision, note: "   " } },
        })
        .catch((e: unknown) => e);
      expect(refused, decision).toBeInstanceOf(NoteRequired);
    }
    expect(await rt.events(runId)).toHaveLength(version);
    await rt.close();
  });
});
