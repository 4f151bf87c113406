import { afterAll, afterEach, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { defineAgent, JournalUnavailable } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { Engine } from "../../src/runtime/engine.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startTcpProxy, type TcpProxy } from "../support/tcpProxy.js";
import { useTempDir } from "../support/tmp.js";
import { countOf, makeRecordTool } from "../support/witness.js";

/*
 * Issue 35, item 1: an append whose COMMIT was sent and whose reply never came. A TCP proxy between
 * the journal and PostgreSQL cuts the connection right after forwarding the commit (the server
 * commits; the journal never hears it) or right before (the server rolls back). An outside witness
 * file counts the effects.
 */

const schemas = usePgSchemas();
afterAll(schemas.dropAll);
const tempDir = useTempDir();

const proxies: TcpProxy[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close().catch(() => undefined);
  for (const proxy of proxies.splice(0)) await proxy.close();
});

const once = defineAgent({
  name: "once",
  version: "1",
  run: async (turn, input: { label: string }) => turn.tool("record", { label: input.label }),
});

let ids = 0;

/** A worker over the proxy; `found` collects what each read-back of a lost commit found. */
const workerVia = async (proxy: TcpProxy, schema: string, witness: string, readBackMs = 30_000) => {
  await requirePg();
  const found: Array<boolean | "partly" | "unknown"> = [];
  const journal = await PostgresJournal.open(proxy.via(pgUrl(schema)), {
    commitReadBackMs: readBackMs,
    onLostCommit: (committed) => found.push(committed),
    retry: { attempts: 1 },
  });
  const workerId = `w${++ids}`;
  const engine = new Engine({
    journal,
    agents: [once],
    tools: [makeRecordTool(witness)],
    secrets: {},
    workerId,
    leaseMs: 3_000,
    recoveryConcurrency: 2,
    newRunId: () => `run-${workerId}-${++ids}`,
    isWorkerDead: () => false,
  });
  engines.push(engine);
  return { engine, journal, found };
};

const proxy = async () => {
  const made = await startTcpProxy();
  proxies.push(made);
  return made;
};

const typesOf = async (journal: PostgresJournal, runId: string) =>
  (await journal.readStream(`run-${runId}`)).map((e) => e.event.type);

describe("an intent whose commit's result never came back (PostgreSQL)", () => {
  it("committed: the journal reads it back, and the effect starts once, after it", async () => {
    const witness = `${tempDir()}/witness`;
    const cut = await proxy();
    const { engine, journal, found } = await workerVia(cut, schemas.fresh(), witness);
    const cutDone = cut.cutAtCommit("call.intended", "after");
    const handle = await engine.submit({
      chatId: "c1",
      inputId: "i1",
      agent: "once",
      content: { label: "x" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await cutDone;
    expect(found).toEqual([true]);
    expect(countOf(witness, "x")).toBe(1);
    const types = await typesOf(journal, handle.runId);
    expect(types.filter((t) => t === "call.intended")).toHaveLength(1);
    expect(types.filter((t) => t === "call.completed")).toHaveLength(1);
    expect((await auditJournal(journal)).findings).toEqual([]);
  });

  it("not committed: the journal reads back nothing and sends it again; the effect starts once", async () => {
    const witness = `${tempDir()}/witness`;
    const cut = await proxy();
    const { engine, journal, found } = await workerVia(cut, schemas.fresh(), witness);
    const cutDone = cut.cutAtCommit("call.intended", "before");
    const handle = await engine.submit({
      chatId: "c1",
      inputId: "i1",
      agent: "once",
      content: { label: "x" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await cutDone;
    expect(found).toEqual([false]);
    expect(countOf(witness, "x")).toBe(1);
    const types = await typesOf(journal, handle.runId);
    expect(types.filter((t) => t === "call.intended")).toHaveLength(1);
    expect(types.filter((t) => t === "call.completed")).toHaveLength(1);
  });

  it("unresolvable (PostgreSQL gone past the read-back window): the effect is not started and the run is left in doubt, never failed; recovery then holds it", async () => {
    const witness = `${tempDir()}/witness`;
    const cut = await proxy();
    const schema = schemas.fresh();
    const { engine, found } = await workerVia(cut, schema, witness, 1_000);
    const cutDone = cut.cutAtCommit("call.intended", "after", "refuse");
    const handle = await engine.submit({
      chatId: "c1",
      inputId: "i1",
      agent: "once",
      content: { label: "x" },
    });
    // The result rejects with the reason; the run is left active.
    const refusal = await handle.result.then(
      () => null,
      (error: unknown) => error,
    );
    await cutDone;
    expect(found).toEqual(["unknown"]);
    expect(refusal).toBeInstanceOf(JournalUnavailable);
    expect((refusal as JournalUnavailable).reason).toMatch(
      /whether the intent of .* was committed is unknown/,
    );
    expect((refusal as JournalUnavailable).written).toBe("unknown");
    expect(countOf(witness, "x")).toBe(0);
    // PostgreSQL is back: the intent is there with no outcome, the run still active — never failed.
    cut.heal();
    expect(await engine.wait(handle.runId)).toMatchObject({ status: "elsewhere" });
    await engine.close();
    const after = await workerVia(cut, schema, witness);
    expect(await typesOf(after.journal, handle.runId)).toEqual(["run.admitted", "call.intended"]);
    // The first worker's lease runs out; recovery classifies the call as in doubt and holds the run.
    let held = false;
    for (let i = 0; i < 100 && !held; i++) {
      await after.engine.recover();
      const row = await after.engine.run(handle.runId);
      held = row?.status === "held";
      if (!held) await new Promise((r) => setTimeout(r, 200));
    }
    expect(held).toBe(true);
    expect(countOf(witness, "x")).toBe(0);
    expect((await auditJournal(after.journal)).findings).toEqual([]);
  });
});

describe("a read-back into a silent network (PostgreSQL)", () => {
  it("a blackhole after the commit: every read-back statement is bounded by the window (a pooled connection into the silence does not wait forever); the effect is not started", async () => {
    const witness = `${tempDir()}/witness`;
    const cut = await proxy();
    const schema = schemas.fresh();
    const { engine, found } = await workerVia(cut, schema, witness, 1_000);
    // Warm the pool, so the read-back finds idle connections that now lead into the blackhole.
    const warm = await engine.submit({ chatId: "c0", inputId: "i0", agent: "once", content: { label: "w" } });
    expect(await warm.result).toMatchObject({ status: "completed" });
    const cutDone = cut.cutAtCommit("call.intended", "after", "blackhole");
    const handle = await engine.submit({
      chatId: "c1",
      inputId: "i1",
      agent: "once",
      content: { label: "x" },
    });
    const refusal = await handle.result.then(
      () => null,
      (error: unknown) => error,
    );
    await cutDone;
    expect(found).toEqual(["unknown"]);
    expect(refusal).toBeInstanceOf(JournalUnavailable);
    expect((refusal as JournalUnavailable).written).toBe("unknown");
    expect(countOf(witness, "x")).toBe(0);
    cut.heal();
  });
});

describe("an outcome whose commit's result never came back (PostgreSQL)", () => {
  it("committed: it is not appended twice", async () => {
    const witness = `${tempDir()}/witness`;
    const cut = await proxy();
    const { engine, journal, found } = await workerVia(cut, schemas.fresh(), witness);
    const cutDone = cut.cutAtCommit("call.completed", "after");
    const handle = await engine.submit({
      chatId: "c1",
      inputId: "i1",
      agent: "once",
      content: { label: "x" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await cutDone;
    expect(found).toEqual([true]);
    expect(countOf(witness, "x")).toBe(1);
    const types = await typesOf(journal, handle.runId);
    expect(types.filter((t) => t === "call.completed")).toHaveLength(1);
    expect(types.filter((t) => t === "conflict.recorded")).toHaveLength(0);
  });

  it("lost: it is appended again, once", async () => {
    const witness = `${tempDir()}/witness`;
    const cut = await proxy();
    const { engine, journal, found } = await workerVia(cut, schemas.fresh(), witness);
    const cutDone = cut.cutAtCommit("call.completed", "before");
    const handle = await engine.submit({
      chatId: "c1",
      inputId: "i1",
      agent: "once",
      content: { label: "x" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await cutDone;
    expect(found).toEqual([false]);
    expect(countOf(witness, "x")).toBe(1);
    const types = await typesOf(journal, handle.runId);
    expect(types.filter((t) => t === "call.completed")).toHaveLength(1);
  });
});
