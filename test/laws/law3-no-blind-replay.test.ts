import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type Disposition, fingerprintOf } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime, type ToolDef } from "../../src/index.js";
import { CURRENT_RUN_MACHINE } from "../../src/machines/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

type Tool = ToolDef<{ readonly n: number }, { readonly n: number }, unknown>;

/** A run killed right after its intent (no owner), recorded with `disposition` and `pin`. */
const inDoubt = async (db: string, tool: Tool, disposition: Disposition, pin: string) => {
  const j = LibsqlJournal.open(db);
  await j.append({
    streamId: "run-r",
    expectedVersion: "no-stream",
    events: [
      {
        type: "run.admitted",
        runId: "r",
        chatId: "c",
        inputId: "i",
        inputDigest: "0".repeat(64),
        agent: { name: "a", version: "1" },
        machine: CURRENT_RUN_MACHINE,
        input: null,
      },
      {
        type: "call.intended",
        runId: "r",
        callId: "r/0",
        seq: 0,
        attempt: 1,
        kind: "tool",
        name: tool.name,
        args: { n: 1 },
        fingerprint: fingerprintOf(j.fingerprintKey, { kind: "tool", name: tool.name, args: { n: 1 } }),
        disposition,
        pin,
        reconciler: tool.reconciler?.name ?? null,
        idempotencyKey: "r/0#1",
      },
    ],
  });
  await j.close();
};

/** Open a runtime on the journal and let recovery finish; how often the effect ran again. */
const recoverWith = async (db: string, tool: Tool, allowlist: Record<string, string>, effects: string[]) => {
  const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(tool, { n: 1 }) });
  const rt = await openRuntime({ store: db, agents: [agent], tools: [tool], allowlist });
  const results = await (rt.recovery as typeof rt.recovery & { done: Promise<unknown[]> }).done;
  const report = { held: rt.recovery.held.map((h) => h.reasons[0]?.code), results, effects: effects.length };
  await rt.close();
  return report;
};

const counting = (
  effects: string[],
  options: { source?: string; reconciler?: "not-completed" | "unknown" } = {},
) =>
  defineTool({
    name: "t",
    args: Schema.Struct({ n: Schema.Number }),
    ...(options.source ? { source: options.source } : {}),
    ...(options.reconciler
      ? {
          reconciler: {
            name: "proof",
            check: async () => ({ outcome: options.reconciler!, evidence: { asked: true } }),
          },
        }
      : {}),
    run: async () => {
      effects.push("ran");
      return "done";
    },
  });

describe("law 3 — no blind replay", () => {
  it("an allowlisted tool whose intent pin equals the safe list's and the current source's is replayed", async () => {
    const db = join(tempDir(), "j.db");
    const effects: string[] = [];
    const tool = counting(effects, { source: "v1" });
    await inDoubt(db, tool, "replay", tool.pin);
    const report = await recoverWith(db, tool, { t: tool.pin }, effects);
    expect(report).toMatchObject({ held: [], effects: 1, results: [{ status: "completed" }] });
  });

  it("a pin that differs anywhere — the intent's, the safe list's, or the current source's — holds the run and runs nothing", async () => {
    for (const [recorded, listed, current] of [
      ["v1", "v2", "v2"],
      ["v1", "v1", "v2"],
      ["v2", "v1", "v1"],
    ] as const) {
      const db = join(tempDir(), "j.db");
      const effects: string[] = [];
      const at = (source: string) => counting(effects, { source });
      await inDoubt(db, at(recorded), "replay", at(recorded).pin);
      const report = await recoverWith(db, at(current), { t: at(listed).pin }, effects);
      expect(report, `${recorded}/${listed}/${current}`).toMatchObject({
        held: ["pin-mismatch"],
        effects: 0,
      });
    }
  });

  it("only an adapter's proof of not-completed runs a reconciled call again; an unknown answer holds it", async () => {
    const db1 = join(tempDir(), "j.db");
    const proven: string[] = [];
    const provenTool = counting(proven, { reconciler: "not-completed" });
    await inDoubt(db1, provenTool, "reconcile", provenTool.pin);
    expect(await recoverWith(db1, provenTool, {}, proven)).toMatchObject({ held: [], effects: 1 });

    const db2 = join(tempDir(), "j.db");
    const unsure: string[] = [];
    const unsureTool = counting(unsure, { reconciler: "unknown" });
    await inDoubt(db2, unsureTool, "reconcile", unsureTool.pin);
    expect(await recoverWith(db2, unsureTool, {}, unsure)).toMatchObject({
      held: ["reconcile-unknown"],
      effects: 0,
    });
  });

  it("a call with disposition hold is held, not repeated, until a person chooses new-attempt", async () => {
    const db = join(tempDir(), "j.db");
    const effects: string[] = [];
    const tool = counting(effects);
    await inDoubt(db, tool, "hold", tool.pin);
    expect(await recoverWith(db, tool, { t: tool.pin }, effects)).toMatchObject({
      held: ["in-doubt"],
      effects: 0,
    });
    const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(tool, { n: 1 }) });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [tool] });
    const version = (await rt.events("r")).length;
    const { result } = await rt.decide("r", {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: { "r/0": { decision: "new-attempt", note: "the remote side has no record of it" } },
    });
    expect(await result).toMatchObject({ status: "completed" });
    expect(effects).toEqual(["ran"]);
    await rt.close();
  });
});
