import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { runStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { callsOfRun } from "../../src/projections/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** A promise and the function that resolves it. */
const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
};

const typesOf = async (rt: Awaited<ReturnType<typeof openRuntime>>, runId: string) =>
  (await rt.events(runId)).map((e) => e.event.type);

describe("calls still in flight when the agent function ends (ownership from claim to settle)", () => {
  it("F1: a call still running when a sibling in turn.all holds the run gets its outcome recorded, under a claim kept until it settles", async () => {
    const db = join(tempDir(), "j.db");
    const effects: string[] = [];
    const release = gate();
    const started = gate();
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({ label: Schema.String }),
      run: async ({ label }) => {
        started.open();
        await release.opened;
        effects.push(label);
        return { done: label };
      },
    });
    const flaky = defineTool({
      name: "flaky",
      args: Schema.Struct({}),
      run: async () => {
        await started.opened;
        throw new Error("connection reset");
      },
    });
    const agent = defineAgent({
      name: "par",
      version: "1",
      run: async (turn) => turn.all([() => turn.tool(slow, { label: "A" }), () => turn.tool(flaky, {})]),
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [slow, flaky] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "par", content: null });
    let settled = false;
    void run.result.then(() => {
      settled = true;
    });
    // B held the run; A is still running: the run is not settled and still claimed by this runtime.
    const probe = LibsqlJournal.open(db);
    for (;;) {
      if ((await probe.readStream(`run-${run.runId}`)).some((e) => e.event.type === "run.held")) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(settled).toBe(false);
    expect((await probe.currentClaim(run.runId))?.workerId).toBe(rt.workerId);
    release.open();
    const result = await run.result;
    expect(result.status).toBe("held");
    expect(effects).toEqual(["A"]);
    const events = (await rt.events(run.runId)).map((e) => e.event);
    expect(events).toContainEqual(
      expect.objectContaining({ type: "call.completed", callId: `${run.runId}/0`, result: { done: "A" } }),
    );
    // Only B is in doubt: A's outcome is committed.
    const calls = Object.fromEntries(
      callsOfRun(await probe.readStream(runStreamId(run.runId))).map((c) => [c.callId, c.status]),
    );
    expect(calls).toEqual({ [`${run.runId}/0`]: "completed", [`${run.runId}/1`]: "in-doubt" });
    // The runtime reads the same: one run's row by its id, and its calls folded from its events.
    expect((await rt.calls(run.runId)).map((c) => [c.callId, c.status])).toEqual(Object.entries(calls));
    expect(await rt.run(run.runId)).toMatchObject({ runId: run.runId, status: "held" });
    expect(await rt.run("no-such-run")).toBeNull();
    expect(await rt.calls("no-such-run")).toEqual([]);
    expect(await probe.currentClaim(run.runId)).toBeNull();
    await probe.close();
    await rt.close();
  });

  it("F1: an agent that throws while a call is in flight waits for its outcome, then fails the run; the audit is clean", async () => {
    const db = join(tempDir(), "j.db");
    const effects: string[] = [];
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({ label: Schema.String }),
      run: async ({ label }) => {
        await new Promise((r) => setTimeout(r, 300));
        effects.push(label);
        return { done: label };
      },
    });
    const strict = defineTool({
      name: "strict",
      args: Schema.Struct({ n: Schema.Number }),
      run: async () => "ok",
    });
    const agent = defineAgent({
      name: "bad-args",
      version: "1",
      // A model proposed two tool calls; the second has bad arguments.
      run: async (turn) =>
        turn.all([() => turn.tool(slow, { label: "B" }), () => turn.tool(strict, { n: "x" } as never)]),
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [slow, strict] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "bad-args", content: null });
    const result = await run.result;
    expect(result).toMatchObject({ status: "failed", error: { name: "InvalidToolArgs" } });
    expect(effects).toEqual(["B"]);
    expect(await typesOf(rt, run.runId)).toEqual([
      "run.admitted",
      "call.intended",
      "call.completed",
      "run.failed",
    ]);
    expect((await rt.audit()).findings).toEqual([]);
    await rt.close();
  });

  it("F1: a call the agent did not await is waited for and recorded before the run completes", async () => {
    const db = join(tempDir(), "j.db");
    const effects: string[] = [];
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({}),
      run: async () => {
        await new Promise((r) => setTimeout(r, 200));
        effects.push("late");
        return "late";
      },
    });
    const agent = defineAgent({
      name: "forgetful",
      version: "1",
      run: async (turn) => {
        void turn.tool(slow, {});
        return "returned first";
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [slow] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "forgetful", content: null });
    expect(await run.result).toMatchObject({ status: "completed", output: "returned first" });
    expect(effects).toEqual(["late"]);
    expect(await typesOf(rt, run.runId)).toEqual([
      "run.admitted",
      "call.intended",
      "call.completed",
      "run.completed",
    ]);
    await rt.close();
  });

  it("F1: the machine refuses run.failed while a call is open (run@2)", async () => {
    const { foldRun, RUN_MACHINE_V2, TransitionRejected } = await import("../../src/machines/index.js");
    const D = "d".repeat(64);
    expect(() =>
      foldRun([
        {
          type: "run.admitted",
          runId: "r",
          chatId: "c",
          inputId: "i",
          inputDigest: D,
          agent: { name: "a", version: "1" },
          machine: RUN_MACHINE_V2,
          input: null,
        },
        {
          type: "call.intended",
          runId: "r",
          callId: "r/0",
          seq: 0,
          attempt: 1,
          kind: "tool",
          name: "t",
          args: {},
          fingerprint: D,
          disposition: "hold",
          pin: null,
          reconciler: null,
          idempotencyKey: "r/0#1",
        },
        { type: "run.failed", runId: "r", error: { name: "E", message: "agent bug" } },
      ]),
    ).toThrow(TransitionRejected);
  });

  it("F18: an output that cannot be stored ends the run as failed with a clear error, and recovery leaves it alone", async () => {
    const db = join(tempDir(), "j.db");
    const agent = defineAgent({ name: "big", version: "1", run: async () => ({ n: 1n }) });
    const rt = await openRuntime({ store: db, agents: [agent] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "big", content: null });
    const result = await run.result;
    expect(result).toMatchObject({ status: "failed", error: { name: "InvalidInput" } });
    expect(result.status === "failed" && result.error.message).toMatch(
      /output of run .* cannot be stored as JSON/,
    );
    expect((await rt.runs())[0]?.status).toBe("failed");
    const pass = await rt.recover();
    expect(pass.resumed).toEqual([]);
    // The chat takes new input.
    const next = await rt.submit({ chatId: "c", inputId: "i2", agent: "big", content: null });
    expect(next.reused).toBe(false);
    await next.result;
    await rt.close();
  });

  it("F12: turn.all with a plan call and a tool call keeps seq order (the plan's intent is not overtaken)", async () => {
    const db = join(tempDir(), "j.db");
    const slow = defineTool({
      name: "slow",
      args: Schema.Struct({ label: Schema.String }),
      run: async ({ label }) => ({ done: label }),
    });
    const agent = defineAgent({
      name: "plan-par",
      version: "1",
      run: async (turn) => turn.all([() => turn.plan.read(), () => turn.tool(slow, { label: "C" })]),
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [slow] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "plan-par", content: null });
    const result = await run.result;
    expect(result).toMatchObject({ status: "completed", output: [{ revision: 0 }, { done: "C" }] });
    const intents = (await rt.events(run.runId)).flatMap((e) =>
      e.event.type === "call.intended" ? [[e.event.seq, e.event.kind]] : [],
    );
    expect(intents).toEqual([
      [0, "document"],
      [1, "tool"],
    ]);
    await rt.close();
  });
});
