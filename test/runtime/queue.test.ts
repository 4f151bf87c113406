import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import { openStore, openStoreReader } from "../../src/adapters/store.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { queueStreamId } from "../../src/events/index.js";
import {
  ActiveRunExists,
  DefiniteFailure,
  defineAgent,
  defineTool,
  InputConflict,
  InvalidInput,
  openRuntime,
  type QueuedHandle,
  QueuedInputAdmitted,
  type RunHandle,
  type Runtime,
} from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Gates the test opens, one per input: the agent waits at its input's gate. */
class Gates {
  private readonly opened = new Map<string, () => void>();
  private readonly waits = new Map<string, Promise<void>>();
  readonly order: string[] = [];
  wait(key: string): Promise<void> {
    let w = this.waits.get(key);
    if (!w) {
      w = new Promise<void>((resolve) => this.opened.set(key, resolve));
      this.waits.set(key, w);
    }
    return w;
  }
  open(key: string): void {
    this.wait(key);
    this.opened.get(key)!();
  }
}

const gatedAgent = (gates: Gates) =>
  defineAgent({
    name: "gated",
    version: "1",
    run: async (turn, input: unknown) => {
      const { text } = input as { text: string };
      gates.order.push(text);
      await gates.wait(text);
      return { echoed: text, chat: turn.chatId };
    },
  });

/** An agent whose one call fails definitely and is not handled: its run is held for a decision. */
const refusing = defineTool({
  name: "refuse",
  args: Schema.Struct({}),
  run: async () => {
    throw new DefiniteFailure("refused", {});
  },
});
const holderAgent = defineAgent({
  name: "holder",
  version: "1",
  run: async (turn) => turn.tool("refuse", {}),
});

const engines = ["libsql", "postgres"] as const;

/** The queue stream of chat `c`, read as a reader (nothing written). */
const queueEvents = async (store: string, chatId = "c") => {
  const reader = await openStoreReader(store);
  try {
    return (await reader.readStream(queueStreamId(chatId))).map((e) => e.event);
  } finally {
    await reader.close();
  }
};

describe.each(engines)("a chat's input queue (%s)", (engine) => {
  let gates: Gates;
  let store: string;
  beforeEach(async () => {
    gates = new Gates();
    if (engine === "postgres") {
      await requirePg();
      store = pgUrl(schemas.fresh());
    } else store = join(tempDir(), "j.db");
  });

  const open = (): Promise<Runtime> =>
    openRuntime({ store, agents: [gatedAgent(gates), holderAgent], tools: [refusing] });

  const submit = (runtime: Runtime, inputId: string, text = inputId) =>
    runtime.submit({ chatId: "c", inputId, agent: "gated", content: { text }, whenBusy: "queue" });

  it("admits three inputs queued behind a running run, in order, each exactly once", async () => {
    const runtime = await open();
    try {
      const first = (await submit(runtime, "m1")) as RunHandle;
      expect(first.queued).toBeFalsy();
      const queued = [await submit(runtime, "m2"), await submit(runtime, "m3"), await submit(runtime, "m4")];
      expect(queued.map((h) => h.queued)).toEqual([true, true, true]);
      expect(queued.map((h) => (h as QueuedHandle).position)).toEqual([1, 2, 3]);
      const listed = await runtime.queue("c");
      expect(listed.items.map((i) => i.inputId)).toEqual(["m2", "m3", "m4"]);
      expect(listed.waitingFor?.runId).toBe(first.runId);

      for (const key of ["m1", "m2", "m3", "m4"]) gates.open(key);
      expect(await first.result).toMatchObject({ status: "completed" });
      const results = await Promise.all(queued.map((h) => h.result));
      expect(results.map((r) => r.status)).toEqual(["completed", "completed", "completed"]);
      expect(gates.order).toEqual(["m1", "m2", "m3", "m4"]);

      const queue = await queueEvents(store);
      const admitted = queue.filter((e) => e.type === "input.admitted");
      expect(admitted.map((e) => e.inputId)).toEqual(["m2", "m3", "m4"]);
      const runs = await runtime.runs();
      expect(runs).toHaveLength(4);
      expect((await runtime.queue("c")).items).toEqual([]);
      const audit = await runtime.audit();
      expect(audit.findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("gives the same queued input back for the same ids and content, and refuses other content", async () => {
    const runtime = await open();
    try {
      const first = (await submit(runtime, "m1")) as RunHandle;
      const queued = await submit(runtime, "m2");
      const again = await submit(runtime, "m2");
      expect(again).toMatchObject({ queued: true, reused: true, position: 1 });
      expect(queued).toMatchObject({ queued: true, reused: false, position: 1 });
      await expect(submit(runtime, "m2", "other text")).rejects.toBeInstanceOf(InputConflict);
      expect((await queueEvents(store)).filter((e) => e.type === "input.queued")).toHaveLength(1);

      gates.open("m1");
      gates.open("m2");
      await first.result;
      const runId = await (queued as QueuedHandle).admitted;
      expect(runId).toEqual(expect.any(String));
      // Admitted now: the same input is that run, other content still a conflict (law 6).
      const afterAdmission = await submit(runtime, "m2");
      expect(afterAdmission).toMatchObject({ runId, reused: true });
      await expect(submit(runtime, "m2", "other text")).rejects.toBeInstanceOf(InputConflict);
      await (afterAdmission as RunHandle).result;
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("withdraws a pending input, and refuses to withdraw one already admitted", async () => {
    const runtime = await open();
    try {
      const first = (await submit(runtime, "m1")) as RunHandle;
      const m2 = (await submit(runtime, "m2")) as QueuedHandle;
      const m3 = (await submit(runtime, "m3")) as QueuedHandle;
      expect(await runtime.withdraw("c", "m2", { by: "ada" })).toMatchObject({ withdrawn: true });
      expect(await runtime.withdraw("c", "m2", { by: "ada" })).toMatchObject({ withdrawn: false });
      expect((await runtime.queue("c")).items.map((i) => [i.inputId, i.position])).toEqual([["m3", 1]]);
      expect(await m2.result).toEqual({ status: "withdrawn", chatId: "c", inputId: "m2", by: "ada" });

      gates.open("m1");
      gates.open("m3");
      await first.result;
      const runId = await m3.admitted;
      await expect(runtime.withdraw("c", "m3", { by: "ada" })).rejects.toBeInstanceOf(QueuedInputAdmitted);
      expect(await m3.result).toMatchObject({ status: "completed", runId });
      expect(gates.order).toEqual(["m1", "m3"]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("keeps the queue waiting behind a held run, and admits the next input after a stop decision", async () => {
    const runtime = await open();
    try {
      const held = (await runtime.submit({
        chatId: "c",
        inputId: "h1",
        agent: "holder",
        content: {},
      })) as RunHandle;
      expect(await held.result).toMatchObject({ status: "held" });
      const next = (await submit(runtime, "m2")) as QueuedHandle;
      expect(next.queued).toBe(true);
      const listed = await runtime.queue("c");
      expect(listed.waitingFor).toMatchObject({ runId: held.runId, status: "held" });
      expect(listed.waitingFor?.detail).toMatch(/^held: waiting for a decision/);
      expect(await runtime.recover()).toMatchObject({ resumed: [] });
      expect((await runtime.queue("c")).items.map((i) => i.inputId)).toEqual(["m2"]);

      gates.open("m2");
      const row = await runtime.run(held.runId);
      await runtime.decide(held.runId, {
        decision: "stop",
        basedOnVersion: row!.version,
        decidedBy: "ada",
        note: "not needed",
      });
      expect(await next.result).toMatchObject({ status: "completed" });
      expect((await runtime.queue("c")).waitingFor).toBeNull();
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("refuses a whenBusy it does not know, writing nothing", async () => {
    const runtime = await open();
    try {
      await expect(
        runtime.submit({
          chatId: "c",
          inputId: "m1",
          agent: "gated",
          content: { text: "m1" },
          whenBusy: "later" as "queue",
        }),
      ).rejects.toBeInstanceOf(InvalidInput);
      expect(await runtime.runs()).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("refuses by default while the chat is busy, as before", async () => {
    const runtime = await open();
    try {
      const first = (await submit(runtime, "m1")) as RunHandle;
      await expect(
        runtime.submit({ chatId: "c", inputId: "m2", agent: "gated", content: { text: "m2" } }),
      ).rejects.toBeInstanceOf(ActiveRunExists);
      gates.open("m1");
      await first.result;
    } finally {
      await runtime.close();
    }
  });

  it("an interrupt cancels the chat's active run, then admits its input after it", async () => {
    const runtime = await openRuntime({
      store,
      agents: [gatedAgent(gates), holderAgent],
      tools: [refusing],
      cancelGraceMs: 200,
    });
    try {
      const first = (await submit(runtime, "m1")) as RunHandle;
      const interrupting = await runtime.submit({
        chatId: "c",
        inputId: "m2",
        agent: "gated",
        content: { text: "m2" },
        whenBusy: "interrupt",
      });
      // The agent ignores the signal: the grace runs out, nothing was in doubt, the run ends cancelled.
      expect(await first.result).toMatchObject({ status: "cancelled" });
      gates.open("m2");
      expect(await interrupting.result).toMatchObject({ status: "completed" });
      expect(gates.order).toEqual(["m1", "m2"]);
      const runs = await runtime.runs();
      expect(runs.map((r) => [r.inputId, r.status]).sort()).toEqual([
        ["m1", "cancelled"],
        ["m2", "completed"],
      ]);
    } finally {
      gates.open("m1");
      await runtime.close();
    }
  });

  it("the audit finds a queue admission apart from its run's admission, and an input admitted twice", async () => {
    const runtime = await open();
    try {
      const first = (await submit(runtime, "m1")) as RunHandle;
      const m2 = (await submit(runtime, "m2")) as QueuedHandle;
      gates.open("m1");
      gates.open("m2");
      await first.result;
      expect(await m2.result).toMatchObject({ status: "completed" });
    } finally {
      await runtime.close();
    }
    const journal = await openStore(store);
    try {
      const head = await journal.streamHead(queueStreamId("c"));
      await journal.append({
        streamId: queueStreamId("c"),
        expectedVersion: head!.version,
        events: [{ type: "input.admitted", chatId: "c", inputId: "m2", runId: "forged" }],
      });
      await journal.append({
        streamId: queueStreamId("c"),
        expectedVersion: head!.version + 1,
        events: [{ type: "input.admitted", chatId: "c", inputId: "never-queued", runId: "forged" }],
      });
    } finally {
      await journal.close();
    }
    const again = await open();
    try {
      const { findings } = await again.audit();
      expect(findings.map((f) => [f.kind, f.detail])).toEqual([
        ["queue-mismatch", "input.admitted for input m2, which was admitted before"],
        ["queue-mismatch", "input.admitted for input never-queued, which this queue never queued"],
      ]);
    } finally {
      await again.close();
    }
  });

  it("retention prunes the finished runs of a chat and never its queue stream; the audit stays clean", async () => {
    const runtime = await open();
    try {
      const first = (await submit(runtime, "m1")) as RunHandle;
      const m2 = (await submit(runtime, "m2")) as QueuedHandle;
      await submit(runtime, "m3");
      gates.open("m1");
      gates.open("m2");
      await first.result;
      await m2.result;
      // m3 runs now (its gate is shut): the queue stream has an input admitted and none pending.
      await (await submit(runtime, "m4")).queued;
    } finally {
      gates.open("m3");
      gates.open("m4");
      await runtime.close();
    }
    const journal = await openStore(store);
    try {
      const before = await journal.readStream(queueStreamId("c"));
      const report = await journal.prune({ keepRuns: 0, keepDays: 0 });
      expect(report.pruned.length).toBeGreaterThanOrEqual(2);
      expect(report.pruned.every((p) => p.streamId.startsWith("run-"))).toBe(true);
      expect(await journal.readStream(queueStreamId("c"))).toEqual(before);
    } finally {
      await journal.close();
    }
    const again = await open();
    try {
      expect((await again.audit()).findings).toEqual([]);
    } finally {
      await again.close();
    }
  });
});

describe("the queue index", () => {
  it("the audit finds a chat whose queue index row is missing while inputs wait (recovery would not find them)", async () => {
    const gates = new Gates();
    const store = join(tempDir(), "j.db");
    const runtime = await openRuntime({ store, agents: [gatedAgent(gates)], tools: [] });
    try {
      const first = (await runtime.submit({
        chatId: "c",
        inputId: "m1",
        agent: "gated",
        content: { text: "m1" },
        whenBusy: "queue",
      })) as RunHandle;
      await runtime.submit({
        chatId: "c",
        inputId: "m2",
        agent: "gated",
        content: { text: "m2" },
        whenBusy: "queue",
      });
      expect((await runtime.audit()).findings).toEqual([]);
      const journal = LibsqlJournal.open(store);
      try {
        journal.unsafeDatabase().prepare("DELETE FROM queue_pending WHERE chat_id = ?").run("c");
      } finally {
        await journal.close();
      }
      expect((await runtime.audit()).findings).toEqual([
        expect.objectContaining({
          kind: "queue-mismatch",
          streamId: queueStreamId("c"),
          detail:
            "the queue index says 0 input(s) pending, the queue stream 1: recovery would not find this chat's queue",
        }),
      ]);
      gates.open("m1");
      gates.open("m2");
      await first.result;
    } finally {
      await runtime.close();
    }
  });
});
