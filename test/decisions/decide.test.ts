import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  defineAgent,
  NoteRequired,
  OutcomeUnknown,
  openRuntime,
  RunNotHeld,
  type Runtime,
  StaleDecision,
} from "../../src/index.js";
import { runWorker } from "../support/processes.js";
import { makeTableTools } from "../support/table-tools.js";
import { useTempDir } from "../support/tmp.js";
import { countOf } from "../support/witness.js";

const tempDir = useTempDir();

/** The "steps" agent, handling an unknown outcome on its own terms (it tells the user). */
const carefulSteps = defineAgent({
  name: "steps",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    let a: unknown;
    try {
      a = await turn.tool("record", { label: `${input.prefix}-a` });
    } catch (error) {
      if (!(error instanceof OutcomeUnknown)) throw error;
      a = "we do not know whether step a happened; please check";
    }
    await turn.checkpoint({ after: "a" });
    const b = await turn.tool("record", { label: `${input.prefix}-b` });
    const c = await turn.tool("record", { label: `${input.prefix}-c` });
    return { a, b, c };
  },
});

/** A run killed by SIGKILL at `point` on its first (non-allowlisted) call, then held by recovery. */
const heldRun = async (point: "after-intent" | "after-effect-before-outcome") => {
  const dir = tempDir();
  const db = join(dir, "journal.db");
  const witness = join(dir, "witness.txt");
  const first = await runWorker({
    HF_DB: db,
    HF_WITNESS: witness,
    HF_CHAT: "c",
    HF_INPUT: "i",
    HF_PREFIX: "p",
    HF_ACTION: "submit",
    HOLDFAST_CRASH_AT: point,
    HOLDFAST_CRASH_CALL: "record",
  });
  expect(first.signal).toBe("SIGKILL");
  const runtime = await openRuntime({
    store: db,
    agents: [carefulSteps],
    tools: makeTableTools(witness).all,
  });
  expect(runtime.recovery.held).toHaveLength(1);
  const runId = runtime.recovery.held[0]!.runId;
  const version = (await runtime.events(runId)).length;
  return { runtime, runId, version, witness, db };
};

const eventCount = async (runtime: Runtime, runId: string) => (await runtime.events(runId)).length;

describe("decisions on a held run, across a real SIGKILL", () => {
  it("confirmed-completed: the effect count stays 1 and the run completes with the confirmed result", async () => {
    const { runtime, runId, version, witness } = await heldRun("after-effect-before-outcome");
    expect(countOf(witness, "p-a")).toBe(1);
    const { result } = await runtime.decide(runId, {
      decision: "confirmed-completed",
      basedOnVersion: version,
      decidedBy: "ada",
      note: "the line is in the witness file",
      result: { label: "p-a", recorded: "confirmed" },
    });
    expect(await result).toMatchObject({
      status: "completed",
      output: { a: { label: "p-a", recorded: "confirmed" } },
    });
    expect(countOf(witness, "p-a")).toBe(1);
    expect(countOf(witness, "p-b")).toBe(1);
    await runtime.close();
  });

  it("new-attempt: the call runs again on purpose, so the effect count is 2", async () => {
    const { runtime, runId, version, witness } = await heldRun("after-effect-before-outcome");
    const { result } = await runtime.decide(runId, {
      decision: "new-attempt",
      basedOnVersion: version,
      decidedBy: "ada",
    });
    expect((await result).status).toBe("completed");
    expect(countOf(witness, "p-a")).toBe(2);
    const intents = (await runtime.events(runId)).filter(
      (e) => e.event.type === "call.intended" && e.event.seq === 0,
    );
    expect(intents.map((e) => (e.event.type === "call.intended" ? e.event.attempt : 0))).toEqual([1, 2]);
    await runtime.close();
  });

  it("confirmed-not-completed: the call runs once more and the run completes", async () => {
    const { runtime, runId, version, witness } = await heldRun("after-intent");
    expect(countOf(witness, "p-a")).toBe(0);
    const { result } = await runtime.decide(runId, {
      decision: "confirmed-not-completed",
      basedOnVersion: version,
      decidedBy: "ada",
      note: "no line in the witness file",
    });
    expect((await result).status).toBe("completed");
    expect(countOf(witness, "p-a")).toBe(1);
    await runtime.close();
  });

  it("stop: the effect count stays 1 and the run is stopped; the chat takes new input", async () => {
    const { runtime, runId, version, witness } = await heldRun("after-effect-before-outcome");
    const { result } = await runtime.decide(runId, {
      decision: "stop",
      basedOnVersion: version,
      decidedBy: "ada",
    });
    expect(await result).toMatchObject({ status: "stopped" });
    expect(countOf(witness, "p-a")).toBe(1);
    expect(countOf(witness, "p-b")).toBe(0);
    const next = await runtime.submit({
      chatId: "c",
      inputId: "next",
      agent: "steps",
      content: { prefix: "n" },
    });
    expect((await next.result).status).toBe("completed");
    await runtime.close();
  });

  it("resume: the agent receives OutcomeUnknown for the call and finishes on its own terms", async () => {
    const { runtime, runId, version, witness } = await heldRun("after-effect-before-outcome");
    const { result } = await runtime.decide(runId, {
      decision: "resume",
      basedOnVersion: version,
      decidedBy: "ada",
    });
    expect(await result).toMatchObject({
      status: "completed",
      output: { a: "we do not know whether step a happened; please check" },
    });
    expect(countOf(witness, "p-a")).toBe(1);
    await runtime.close();
  });
});

describe("refused decisions write nothing", () => {
  it("a stale decision is refused naming the current version", async () => {
    const { runtime, runId, version, db } = await heldRun("after-intent");
    const before = await eventCount(runtime, runId);
    const refused = runtime.decide(runId, {
      decision: "stop",
      basedOnVersion: version - 1,
      decidedBy: "ada",
    });
    await expect(refused).rejects.toBeInstanceOf(StaleDecision);
    await expect(refused).rejects.toMatchObject({ runId, basedOn: version - 1, current: version });
    expect(await eventCount(runtime, runId)).toBe(before);
    await runtime.close();
    void db;
  });

  it("two concurrent decisions on the same version: exactly one is recorded", async () => {
    const { runtime, runId, version, db, witness } = await heldRun("after-intent");
    // A second runtime on the same file, as a second operator's process would be.
    const other = await openRuntime({
      store: db,
      agents: [carefulSteps],
      tools: makeTableTools(witness).all,
      recovery: { onOpen: false },
    });
    const outcomes = await Promise.allSettled([
      runtime.decide(runId, { decision: "stop", basedOnVersion: version, decidedBy: "ada" }),
      other.decide(runId, {
        decision: "confirmed-not-completed",
        basedOnVersion: version,
        decidedBy: "bob",
        note: "checked",
      }),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(["fulfilled", "rejected"]);
    const rejected = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
    expect(rejected.reason).toBeInstanceOf(StaleDecision);
    const settled = outcomes.find((o) => o.status === "fulfilled") as PromiseFulfilledResult<{
      result: Promise<unknown>;
    }>;
    await settled.value.result;
    await other.close();
    const journal = LibsqlJournal.open(db);
    const decisions = (await journal.readStream(`run-${runId}`)).filter(
      (e) => e.event.type === "decision.recorded",
    );
    await journal.close();
    expect(decisions).toHaveLength(1);
    await runtime.close();
  });

  it("a confirmation without a note is refused", async () => {
    const { runtime, runId, version } = await heldRun("after-intent");
    const before = await eventCount(runtime, runId);
    for (const decision of ["confirmed-completed", "confirmed-not-completed"] as const) {
      await expect(
        runtime.decide(runId, { decision, basedOnVersion: version, decidedBy: "ada", note: "  " }),
      ).rejects.toBeInstanceOf(NoteRequired);
    }
    expect(await eventCount(runtime, runId)).toBe(before);
    await runtime.close();
  });

  it("a decision on a run that is not held is refused", async () => {
    const { runtime, runId, version } = await heldRun("after-intent");
    const { result } = await runtime.decide(runId, {
      decision: "new-attempt",
      basedOnVersion: version,
      decidedBy: "ada",
    });
    await result;
    const done = await eventCount(runtime, runId);
    await expect(
      runtime.decide(runId, { decision: "stop", basedOnVersion: done, decidedBy: "ada" }),
    ).rejects.toBeInstanceOf(RunNotHeld);
    expect(await eventCount(runtime, runId)).toBe(done);
    await runtime.close();
  });
});
