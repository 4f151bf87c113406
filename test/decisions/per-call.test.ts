import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import {
  CallNotInDoubt,
  DecisionNeedsCalls,
  defineAgent,
  defineTool,
  InvalidInput,
  openRuntime,
  type Runtime,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/**
 * Two calls started together; both fail without proof (a reset connection, a timeout), so both are
 * in doubt and the run is held. `effects` counts each real effect; `failing` says which still fail.
 */
const twoInDoubt = async () => {
  const db = join(tempDir(), "j.db");
  const effects: string[] = [];
  const failing = new Set(["A", "B"]);
  const effect = (label: string) =>
    defineTool({
      name: label === "A" ? "charge" : "notify",
      args: Schema.Struct({}),
      run: async () => {
        effects.push(label);
        if (failing.has(label)) throw new Error(`${label}: connection reset after send`);
        return { done: label };
      },
    });
  const charge = effect("A");
  const notify = effect("B");
  const agent = defineAgent({
    name: "pair",
    version: "1",
    run: async (turn) => turn.all([() => turn.tool(charge, {}), () => turn.tool(notify, {})]),
  });
  const rt = await openRuntime({ store: db, agents: [agent], tools: [charge, notify] });
  const run = await rt.submit({ chatId: "c", inputId: "i", agent: "pair", content: null });
  const held = await run.result;
  expect(held.status).toBe("held");
  const version = (await rt.events(run.runId)).length;
  return { rt, runId: run.runId, version, effects, failing, a: `${run.runId}/0`, b: `${run.runId}/1` };
};

const types = async (rt: Runtime, runId: string) => (await rt.events(runId)).map((e) => e.event.type);

describe("a run held by sibling calls", () => {
  it("two calls in doubt at once: the run's held reasons name both (each hold reads the one before)", async () => {
    const { rt, runId, a, b } = await twoInDoubt();
    const row = (await rt.runs()).find((r) => r.runId === runId);
    expect(row?.heldReasons.map((r) => r.callId).sort()).toEqual([a, b].sort());
    const held = (await rt.events(runId)).filter((e) => e.event.type === "run.held").at(-1)?.event;
    expect(held).toMatchObject({
      reasons: expect.arrayContaining([
        expect.objectContaining({ callId: a }),
        expect.objectContaining({ callId: b }),
      ]),
    });
    await rt.close();
  });
});

describe("per-call decisions", () => {
  it("F1: A happened, B did not — one decision per call, applied together; new-attempt for B never re-runs A", async () => {
    const { rt, runId, version, effects, failing, a, b } = await twoInDoubt();
    expect([...effects].sort()).toEqual(["A", "B"]);
    failing.clear();
    const { result } = await rt.decide(runId, {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: {
        [a]: { decision: "confirmed-completed", note: "the charge is in the ledger", result: { done: "A" } },
        [b]: { decision: "new-attempt", note: "the notification service has no record of it" },
      },
    });
    expect(await result).toMatchObject({ status: "completed", output: [{ done: "A" }, { done: "B" }] });
    // A ran once (never again); B ran twice (once in doubt, once on purpose).
    expect(effects.filter((e) => e === "A")).toHaveLength(1);
    expect(effects.filter((e) => e === "B")).toHaveLength(2);
    const decided = (await rt.events(runId)).find((e) => e.event.type === "decision.recorded")?.event;
    expect(decided).toMatchObject({
      calls: [
        { callId: a, decision: "confirmed-completed" },
        { callId: b, decision: "new-attempt" },
      ],
      run: "continue",
    });
    expect((await rt.audit()).findings).toEqual([]);
    await rt.close();
  });

  it("F1: a run-level decision on a run with several calls in doubt is refused, naming every call; nothing is written", async () => {
    const { rt, runId, version, a, b } = await twoInDoubt();
    const refused = await rt
      .decide(runId, { basedOnVersion: version, decidedBy: "ada", decision: "new-attempt" })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DecisionNeedsCalls);
    expect((refused as DecisionNeedsCalls).callIds).toEqual([a, b]);
    expect((refused as Error).message).toContain(`--call <callId> <decision>`);
    expect(await rt.events(runId)).toHaveLength(version);
    await rt.close();
  });

  it("deciding some of the calls keeps the run held for the others; the next decision continues it", async () => {
    const { rt, runId, version, failing, a, b } = await twoInDoubt();
    failing.clear();
    const first = await rt.decide(runId, {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: { [a]: { decision: "confirmed-not-completed", note: "no such charge in the ledger" } },
    });
    const still = await first.result;
    expect(still.status).toBe("held");
    expect(still.status === "held" && still.reasons.map((r) => r.callId)).toEqual([b]);
    expect((await types(rt, runId)).slice(-2)).toEqual(["decision.recorded", "run.held"]);
    const second = await rt.decide(runId, {
      basedOnVersion: first.version,
      decidedBy: "ada",
      calls: { [b]: { decision: "resume" } },
    });
    // A runs fresh (it provably did not happen); B's outcome stays unknown, which the agent does not handle.
    const end = await second.result;
    expect(end.status).toBe("failed");
    expect(end.status === "failed" && end.error.name).toBe("OutcomeUnknown");
    await rt.close();
  });

  it("stop needs no call list: every call in doubt stays unknown and the run ends with run.stopped", async () => {
    const { rt, runId, version } = await twoInDoubt();
    const { result } = await rt.decide(runId, {
      basedOnVersion: version,
      decidedBy: "ada",
      decision: "stop",
    });
    expect(await result).toMatchObject({ status: "stopped" });
    expect((await types(rt, runId)).slice(-2)).toEqual(["decision.recorded", "run.stopped"]);
    expect((await rt.runs()).find((r) => r.runId === runId)?.status).toBe("stopped");
    await rt.close();
  });

  it("a decision naming a call that is not in doubt is refused with the calls that are", async () => {
    const { rt, runId, version, a, b } = await twoInDoubt();
    await rt.decide(runId, {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: { [a]: { decision: "confirmed-completed", note: "seen in the ledger" } },
    });
    const now = (await rt.events(runId)).length;
    const again = await rt
      .decide(runId, { basedOnVersion: now, decidedBy: "ada", calls: { [a]: { decision: "new-attempt" } } })
      .catch((e: unknown) => e);
    expect(again).toBeInstanceOf(CallNotInDoubt);
    expect((again as CallNotInDoubt).inDoubt).toEqual([b]);
    await rt.close();
  });

  it("a confirmed-completed result is checked against the tool's result Schema, per call", async () => {
    const db = join(tempDir(), "j.db");
    const pay = defineTool({
      name: "pay",
      args: Schema.Struct({ amount: Schema.Number }),
      result: Schema.Struct({ receipt: Schema.String }),
      run: async () => {
        throw new Error("gateway timeout");
      },
    });
    const agent = defineAgent({
      name: "payer",
      version: "1",
      run: async (turn) => turn.tool(pay, { amount: 5 }),
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [pay] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "payer", content: null });
    expect((await run.result).status).toBe("held");
    const version = (await rt.events(run.runId)).length;
    const bad = await rt
      .decide(run.runId, {
        basedOnVersion: version,
        decidedBy: "ada",
        calls: {
          [`${run.runId}/0`]: { decision: "confirmed-completed", note: "paid", result: { receipt: 7 } },
        },
      })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(InvalidInput);
    expect((bad as Error).message).toContain(`result for call ${run.runId}/0 (pay)`);
    const good = await rt.decide(run.runId, {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: {
        [`${run.runId}/0`]: { decision: "confirmed-completed", note: "paid", result: { receipt: "r-1" } },
      },
    });
    expect(good.unchecked).toEqual([]);
    expect(await good.result).toMatchObject({ status: "completed", output: { receipt: "r-1" } });
    await rt.close();
  });
});
