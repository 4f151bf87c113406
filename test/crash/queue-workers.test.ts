import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openStoreReader } from "../../src/adapters/store.js";
import { queueStreamId } from "../../src/events/index.js";
import { defineAgent, openRuntime, type QueuedHandle, type RunHandle } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { makeRecordTool, witnessLines } from "../support/witness.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());
const WORKER = join(import.meta.dirname, "..", "support", "queue-worker.ts");

const queueOf = async (store: string) => {
  const reader = await openStoreReader(store);
  try {
    return (await reader.readStream(queueStreamId("c"))).map((e) => e.event);
  } finally {
    await reader.close();
  }
};

describe("a chat's queue on PostgreSQL with two workers", () => {
  it("the run ends on worker A while worker B's recovery passes race it: each queued input is admitted once", async () => {
    await requirePg();
    const store = pgUrl(schemas.fresh());
    const witness = join(tempDir(), "witness.txt");
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const record = makeRecordTool(witness);
    const agent = defineAgent({
      name: "replier",
      version: "1",
      run: async (turn, input: { label: string }) => {
        if (input.label === "m1") await gate;
        return turn.tool(record, { label: input.label });
      },
    });
    const open = (workerId: string) =>
      openRuntime({ store, agents: [agent], tools: [record], workerId, recovery: { leaseMs: 5_000 } });
    const a = await open("worker-a");
    const b = await open("worker-b");
    try {
      const submit = (inputId: string) =>
        a.submit({ chatId: "c", inputId, agent: "replier", content: { label: inputId }, whenBusy: "queue" });
      const first = (await submit("m1")) as RunHandle;
      const queued = [(await submit("m2")) as QueuedHandle, (await submit("m3")) as QueuedHandle];
      expect(queued.map((q) => q.queued)).toEqual([true, true]);

      release();
      // B's passes look for idle queues while A ends its run and admits the next input.
      const passes = Promise.all(
        Array.from({ length: 6 }, async () => {
          const pass = await b.recover();
          await pass.done;
        }),
      );
      await first.result;
      await passes;
      const results = await Promise.all(queued.map((q) => q.result));
      expect(results.map((r) => r.status)).toEqual(["completed", "completed"]);

      const queue = await queueOf(store);
      expect(queue.filter((e) => e.type === "input.admitted").map((e) => e.inputId)).toEqual(["m2", "m3"]);
      expect(witnessLines(witness)).toEqual(["m1", "m2", "m3"]);
      expect(await a.runs()).toHaveLength(3);
      expect((await a.audit()).findings).toEqual([]);
    } finally {
      await b.close();
      await a.close();
    }
  });

  it("worker A dies after its run ended but before admitting the next input: worker B's recovery admits it", async () => {
    await requirePg();
    const store = pgUrl(schemas.fresh());
    const witness = join(tempDir(), "witness.txt");
    const killed = await runScript(WORKER, {
      HF_DB: store,
      HF_WITNESS: witness,
      HF_ACTION: "submit",
      HF_INPUTS: "3",
      HOLDFAST_CRASH_AT: "before-queue-admit",
    });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    expect(witnessLines(witness)).toEqual(["m1"]);
    expect((await queueOf(store)).filter((e) => e.type === "input.admitted")).toEqual([]);

    const record = makeRecordTool(witness);
    const agent = defineAgent({
      name: "replier",
      version: "1",
      run: async (turn, input: { label: string }) => turn.tool(record, { label: input.label }),
    });
    const b = await openRuntime({ store, agents: [agent], tools: [record], workerId: "worker-b" });
    try {
      const { done } = b.recovery as typeof b.recovery & { done: Promise<unknown> };
      await done;
      for (;;) {
        const queue = await b.queue("c");
        if (queue.items.length === 0 && queue.waitingFor === null) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(witnessLines(witness)).toEqual(["m1", "m2", "m3"]);
      const queue = await queueOf(store);
      expect(queue.filter((e) => e.type === "input.admitted").map((e) => e.inputId)).toEqual(["m2", "m3"]);
      expect((await b.audit()).findings).toEqual([]);
    } finally {
      await b.close();
    }
  });
});
