import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { isWorkerDead, localWorkerId } from "../../src/adapters/localWorker.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { fingerprintOf } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime, type ToolDef } from "../../src/index.js";
import { CURRENT_RUN_MACHINE } from "../../src/machines/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A run left by a killed process with calls of `tool` in doubt (seq 0…n-1, started together), as
 * a SIGKILL right after the intents would leave it: no owner, nothing else.
 */
const interruptedRun = async (
  db: string,
  runId: string,
  tool: ToolDef<{ readonly label: string }, { readonly label: string }, unknown>,
  labels: ReadonlyArray<string>,
  agent = "a",
) => {
  const j = LibsqlJournal.open(db);
  await j.append({
    streamId: `run-${runId}`,
    expectedVersion: "no-stream",
    events: [
      {
        type: "run.admitted",
        runId,
        chatId: `chat-${runId}`,
        inputId: "i",
        inputDigest: "0".repeat(64),
        agent: { name: agent, version: "1" },
        machine: CURRENT_RUN_MACHINE,
        input: null,
      },
      ...labels.map((label, seq) => ({
        type: "call.intended" as const,
        runId,
        callId: `${runId}/${seq}`,
        seq,
        attempt: 1,
        kind: "tool" as const,
        name: tool.name,
        args: { label },
        fingerprint: fingerprintOf(j.fingerprintKey, { kind: "tool", name: tool.name, args: { label } }),
        disposition: "reconcile" as const,
        pin: tool.pin,
        reconciler: tool.reconciler?.name ?? null,
        idempotencyKey: `${runId}/${seq}#1`,
      })),
    ],
  });
  await j.close();
};

describe("ownership from claim to settle, in recovery", () => {
  it("F11: a recovery whose reconcilers together outlast the lease keeps the run renewed, and its authorized attempts run", async () => {
    const db = join(tempDir(), "j.db");
    const effects: string[] = [];
    const rec = defineTool({
      name: "rec",
      args: Schema.Struct({ label: Schema.String }),
      reconciler: {
        name: "slow-rec",
        // Each answer takes 1.2 s: three of them outlast the 3 s lease.
        check: async () => {
          await sleep(1_200);
          return { outcome: "not-completed", evidence: { looked: true } };
        },
      },
      run: async ({ label }) => {
        effects.push(label);
        return { done: label };
      },
    });
    const labels = ["x", "y", "z"];
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => turn.all(labels.map((label) => () => turn.tool(rec, { label }))),
    });
    await interruptedRun(db, "r1", rec, labels);
    const rt = await openRuntime({ store: db, agents: [agent], tools: [rec], recovery: { leaseMs: 3_000 } });
    expect(rt.recovery.reconciled).toEqual(["r1/0", "r1/1", "r1/2"]);
    const [result] = await (rt.recovery as typeof rt.recovery & { done: Promise<unknown[]> }).done;
    expect(result).toMatchObject({ status: "completed" });
    expect(effects.sort()).toEqual(labels);
    await rt.close();
  }, 30_000);

  it("F19: a reconciler that answers nothing holds its own run only; the other runs recover and openRuntime succeeds", async () => {
    const db = join(tempDir(), "j.db");
    const answers: Record<string, unknown> = {
      broken: undefined,
      fine: { outcome: "not-completed", evidence: {} },
    };
    const rec = defineTool({
      name: "rec",
      args: Schema.Struct({ label: Schema.String }),
      reconciler: {
        name: "r",
        check: async (_probe, context) =>
          answers[context.args ? (context.args as { label: string }).label : ""] as never,
      },
      run: async ({ label }) => ({ done: label }),
    });
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn, _input) => turn.tool(rec, { label: "fine" }),
    });
    const brokenAgent = defineAgent({
      name: "b",
      version: "1",
      run: async (turn) => turn.tool(rec, { label: "broken" }),
    });
    await interruptedRun(db, "r1", rec, ["broken"], "b");
    await interruptedRun(db, "r2", rec, ["fine"], "a");
    const rt = await openRuntime({ store: db, agents: [agent, brokenAgent], tools: [rec] });
    expect(rt.recovery.held.map((h) => h.runId)).toEqual(["r1"]);
    expect(rt.recovery.held[0]?.reasons[0]?.detail).toContain("not a verdict");
    expect(rt.recovery.resumed).toEqual(["r2"]);
    const results = await (rt.recovery as typeof rt.recovery & { done: Promise<unknown[]> }).done;
    expect(results).toEqual([expect.objectContaining({ runId: "r2", status: "completed" })]);
    await rt.close();
  });

  it("readers are not workers: a runtime without a run's agent leaves it alone (no claim, no hold), for the application that has it", async () => {
    const db = join(tempDir(), "j.db");
    const rec = defineTool({
      name: "rec",
      args: Schema.Struct({ label: Schema.String }),
      reconciler: { name: "r", check: async () => ({ outcome: "not-completed", evidence: {} }) },
      run: async ({ label }) => ({ done: label }),
    });
    await interruptedRun(db, "r1", rec, ["x"]);
    const watcher = await openRuntime({ store: db });
    expect(watcher.recovery.notHere).toEqual([{ runId: "r1", agent: "a@1" }]);
    expect(watcher.recovery.held).toEqual([]);
    expect((await watcher.events("r1")).map((e) => e.event.type)).toEqual(["run.admitted", "call.intended"]);
    await watcher.close();
    // The application with the agent reconciles it as it should.
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) => turn.tool(rec, { label: "x" }),
    });
    const app = await openRuntime({ store: db, agents: [agent], tools: [rec] });
    expect(app.recovery.reconciled).toEqual(["r1/0"]);
    await (app.recovery as typeof app.recovery & { done: Promise<unknown[]> }).done;
    await app.close();
  });

  it("F7: an operator's runtime started with a live worker's HOLDFAST_WORKER_ID leaves the worker's claims alone; the worker's outcome is recorded", async () => {
    const db = join(tempDir(), "j.db");
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const effects: string[] = [];
    const send = defineTool({
      name: "send",
      args: Schema.Struct({}),
      run: async () => {
        await gate;
        effects.push("sent");
        return "sent";
      },
    });
    const agent = defineAgent({ name: "s", version: "1", run: async (turn) => turn.tool(send, {}) });
    const worker = await openRuntime({ store: db, agents: [agent], tools: [send], workerId: "pod-7" });
    const run = await worker.submit({ chatId: "c", inputId: "i", agent: "s", content: null });
    await sleep(100);
    // `kubectl exec pod-7 -- holdfast decide …`: the operator command inherits the pod's environment.
    process.env.HOLDFAST_WORKER_ID = "pod-7";
    try {
      const { openOperatorRuntime } = await import("../../src/adapters/surfaces/cli/commands/decide.js");
      const operator = await openOperatorRuntime(db);
      expect(operator.workerId).not.toBe("pod-7");
      await operator.close();
    } finally {
      delete process.env.HOLDFAST_WORKER_ID;
    }
    const j = LibsqlJournal.open(db);
    expect((await j.currentClaim(run.runId))?.workerId).toBe("pod-7");
    await j.close();
    release();
    expect(await run.result).toMatchObject({ status: "completed", output: "sent" });
    expect(effects).toEqual(["sent"]);
    await worker.close();
  });

  it("F7: close() releases only the claims this runtime took, never another runtime's claim under the same worker id", async () => {
    const db = join(tempDir(), "j.db");
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const send = defineTool({
      name: "send",
      args: Schema.Struct({}),
      run: async () => {
        await gate;
        return "sent";
      },
    });
    const agent = defineAgent({ name: "s", version: "1", run: async (turn) => turn.tool(send, {}) });
    const one = await openRuntime({ store: db, agents: [agent], tools: [send], workerId: "same" });
    const run = await one.submit({ chatId: "c", inputId: "i", agent: "s", content: null });
    const two = await openRuntime({ store: db, workerId: "same", recovery: { onOpen: false } });
    await two.close();
    const j = LibsqlJournal.open(db);
    expect((await j.currentClaim(run.runId))?.workerId).toBe("same");
    await j.close();
    release();
    expect(await run.result).toMatchObject({ status: "completed" });
    await one.close();
  });
});

describe("a recovery pass claims its runs in batches", () => {
  it("more runs than one batch, unowned, owned by a dead worker and by a live one: each classified as alone, taken over at the next epoch or left", async () => {
    const db = join(tempDir(), "j.db");
    const effects: string[] = [];
    const t = defineTool({
      name: "t",
      args: Schema.Struct({ label: Schema.String }),
      disposition: "hold",
      run: async ({ label }) => {
        effects.push(label);
        return { done: label };
      },
    });
    const agent = defineAgent({ name: "a", version: "1", run: async (turn) => turn.tool(t, { label: "x" }) });
    // A worker id whose process cannot exist here (a pid above the kernel's limit): known dead.
    const pidMax = Number(readFileSync("/proc/sys/kernel/pid_max", "utf8"));
    const dead = localWorkerId().replace(/^([^:]*):\d+:/, `$1:${pidMax + 1}:`);
    expect(isWorkerDead(dead)).toBe(true);
    const runIds = Array.from({ length: 150 }, (_, i) => `r${String(i).padStart(3, "0")}`);
    // Every third run has its call in doubt (held); the others have not made it yet (resumed).
    const inDoubt = (i: number) => i % 3 === 0;
    for (const [i, runId] of runIds.entries()) await interruptedRun(db, runId, t, inDoubt(i) ? ["x"] : []);
    const owners = LibsqlJournal.open(db);
    // r050…r099 were a killed worker's; r100…r149 are a live worker's (an id never judged dead).
    await owners.claimMany(runIds.slice(50, 100), dead, 60_000);
    await owners.claimMany(runIds.slice(100), "alive-elsewhere", 60_000);

    const rt = await openRuntime({ store: db, agents: [agent], tools: [t], recovery: { onOpen: false } });
    try {
      const report = await rt.recover();
      const mine = runIds.slice(0, 100);
      expect(report.interrupted).toEqual(mine);
      expect(report.ownedElsewhere).toEqual(runIds.slice(100));
      expect(report.held.map((h) => h.runId)).toEqual(mine.filter((_, i) => inDoubt(i)));
      expect(report.resumed).toEqual(mine.filter((_, i) => !inDoubt(i)));
      const results = await report.done;
      expect(results.filter((r) => r.status === "completed")).toHaveLength(report.resumed.length);
      expect(effects).toHaveLength(report.resumed.length);
      for (const [i, runId] of mine.entries()) {
        const types = (await owners.readStream(`run-${runId}`)).map((e) => e.event);
        const claimed = types.filter((e) => e.type === "run.claimed");
        // A take-over is recorded, at the next epoch; an unowned run's claim is no take-over.
        if (i >= 50) expect(claimed).toEqual([expect.objectContaining({ previousWorkerId: dead, epoch: 2 })]);
        else expect(claimed).toEqual([]);
        // Let go once classified (held) or finished (resumed).
        expect(await owners.currentClaim(runId)).toBeNull();
      }
      for (const runId of runIds.slice(100)) {
        expect(await owners.currentClaim(runId)).toMatchObject({ workerId: "alive-elsewhere", epoch: 1 });
        expect((await owners.readStream(`run-${runId}`)).map((e) => e.event.type)).toEqual([
          "run.admitted",
          ...(runIds.indexOf(runId) % 3 === 0 ? ["call.intended"] : []),
        ]);
      }
    } finally {
      await rt.close();
      await owners.close();
    }
  }, 60_000);
});
