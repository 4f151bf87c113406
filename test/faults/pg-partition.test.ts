import { appendFileSync } from "node:fs";
import { Schema } from "effect";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { defineAgent, defineTool } from "../../src/index.js";
import { NOT_STARTED_EVIDENCE } from "../../src/runtime/attempt.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { Engine } from "../../src/runtime/engine.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.js";
import { useTempDir } from "../support/tmp.js";
import { countOf } from "../support/witness.js";

/*
 * Issue 35, item 3: a worker partitioned from PostgreSQL (a proxy that blackholes both directions)
 * for longer than its lease, while one of its calls is in flight. Another worker takes the run over;
 * when the partition heals, the first is fenced out: the call it had in flight is recorded once (as
 * the late outcome the hold asked about), and it starts nothing more.
 */

const schemas = usePgSchemas();
afterAll(schemas.dropAll);
const tempDir = useTempDir();
const engines: Engine[] = [];
const proxies: TcpProxy[] = [];
afterEach(async () => {
  for (const proxy of proxies) proxy.heal();
  for (const engine of engines.splice(0)) await engine.close().catch(() => undefined);
  for (const proxy of proxies.splice(0)) await proxy.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A three-step agent whose second step waits at a gate the test opens; workers made on demand. */
const given = async () => {
  await requirePg();
  const witness = `${tempDir()}/witness`;
  const schema = schemas.fresh();
  let reached!: () => void;
  const atGate = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let open!: () => void;
  const gateOpen = new Promise<void>((resolve) => {
    open = resolve;
  });
  const record = defineTool({
    name: "record",
    args: Schema.Struct({ label: Schema.String }),
    run: async ({ label }) => {
      appendFileSync(witness, `${label}\n`);
      if (label === "gate") {
        reached();
        await gateOpen;
      }
      return { label };
    },
  });
  const agent = defineAgent({
    name: "three",
    version: "1",
    run: async (turn) => {
      await turn.tool("record", { label: "p-1" });
      await turn.tool("record", { label: "gate" });
      return turn.tool("record", { label: "p-2" });
    },
  });
  const proxy = await startTcpProxy();
  proxies.push(proxy);
  const engineOn = async (url: string, workerId: string, leaseMs = 3_000) => {
    const engine = new Engine({
      journal: await PostgresJournal.open(url, { retry: { attempts: 1 } }),
      agents: [agent],
      tools: [record],
      secrets: {},
      workerId,
      leaseMs,
      recoveryConcurrency: 2,
      newRunId: () => `run-${workerId}`,
      isWorkerDead: () => false,
    });
    engines.push(engine);
    return engine;
  };
  return { witness, proxy, engineOn, schema, atGate, open };
};

describe("a worker partitioned from PostgreSQL longer than its lease", () => {
  it("is fenced out of the run taken over meanwhile: its in-flight call is recorded once, as a late outcome, and it starts no effect after the partition", async () => {
    const { witness, proxy, engineOn, schema, atGate, open } = await given();
    const cut = await engineOn(proxy.via(pgUrl(schema)), "w-cut");
    const other = await engineOn(pgUrl(schema), "w-other");
    const handle = await cut.submit({ chatId: "c", inputId: "i", agent: "three", content: null });
    await atGate;
    proxy.blackhole();
    open();
    // The other worker takes the run over once the partitioned worker's lease has run out, and
    // holds it: the gate call has an intent and no outcome.
    let held = false;
    for (let i = 0; i < 100 && !held; i++) {
      await sleep(300);
      await (await other.recover()).done;
      held = (await other.run(handle.runId))?.status === "held";
    }
    expect(held).toBe(true);
    proxy.heal();
    const result = await handle.result;
    expect(result.status).toBe("elsewhere");
    // Every effect once; nothing started by the fenced worker after the partition.
    expect([countOf(witness, "p-1"), countOf(witness, "gate"), countOf(witness, "p-2")]).toEqual([1, 1, 0]);
    const events = (await other.journal.readStream(`run-${handle.runId}`)).map((e) => e.event);
    const claimed = events.filter((e) => e.type === "run.claimed");
    expect(claimed.at(-1)).toMatchObject({ workerId: "w-other", previousWorkerId: "w-cut" });
    const gateOutcomes = events.filter(
      (e) => (e.type === "call.completed" || e.type === "conflict.recorded") && e.callId?.endsWith("/1"),
    );
    expect(gateOutcomes).toHaveLength(1);
    expect(events.filter((e) => e.type === "call.intended" && e.callId.endsWith("/2"))).toEqual([]);
    expect((await auditJournal(other.journal)).findings).toEqual([]);
  }, 60_000);

  it("a network slower than the lease: the owner refuses to start its next effect for want of margin, records it not started, and the run resumes elsewhere with that call run once", async () => {
    const { witness, proxy, engineOn, schema, atGate, open } = await given();
    // The lease is 3 s and its margin 1 s: answers 3.2 s late leave none after any renewal.
    const slow = await engineOn(proxy.via(pgUrl(schema)), "w-slow");
    const other = await engineOn(pgUrl(schema), "w-other");
    const handle = await slow.submit({ chatId: "c", inputId: "i", agent: "three", content: null });
    await atGate;
    // Every answer now comes back later than a renewal can keep the margin: the lease as this
    // worker knows it is always nearly over, though PostgreSQL keeps renewing it.
    proxy.delay(1_600);
    open();
    const result = await handle.result;
    expect(result).toMatchObject({
      status: "elsewhere",
      state: expect.stringMatching(/lease check refused/),
    });
    expect(countOf(witness, "p-2")).toBe(0);
    proxy.heal();
    const events = (await other.journal.readStream(`run-${handle.runId}`)).map((e) => e.event);
    expect(events.filter((e) => e.type === "call.reconciled")).toEqual([
      expect.objectContaining({ outcome: "not-completed", evidence: NOT_STARTED_EVIDENCE }),
    ]);
    // Resumed by the other worker: p-2 runs once, fresh; nothing else runs again.
    let done = false;
    for (let i = 0; i < 100 && !done; i++) {
      await (await other.recover()).done;
      done = (await other.run(handle.runId))?.status === "completed";
      if (!done) await sleep(200);
    }
    expect(done).toBe(true);
    expect([countOf(witness, "p-1"), countOf(witness, "gate"), countOf(witness, "p-2")]).toEqual([1, 1, 1]);
    expect((await auditJournal(other.journal)).findings).toEqual([]);
  }, 150_000);
});
