import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  InputConflict,
  openRuntime,
  type QueuedHandle,
  type Runtime,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

// The review findings on cancel / pause / queue (decisions 0043–0045), each as it was reproduced.
const tempDir = useTempDir();

let startedIgnoring: () => void = () => undefined;
let caughtRefusal: () => void = () => undefined;
let releaseCatch: () => void = () => undefined;
let pauseAsked: Promise<void> = Promise.resolve();

const quick = defineTool({ name: "quick", args: Schema.Struct({}), run: async () => "ok" });
const ignoring = defineTool({
  name: "ignoring",
  args: Schema.Struct({}),
  run: async () => {
    startedIgnoring();
    return new Promise<never>(() => undefined);
  },
});
const honouring = defineTool({
  name: "honouring",
  args: Schema.Struct({}),
  run: async (_args, { signal }) =>
    new Promise((_resolve, reject) => {
      signal.addEventListener("abort", () => reject(new DefiniteFailure("aborted before sending")));
    }),
});

const agents = [
  defineAgent({
    name: "one",
    version: "1",
    run: async (turn, input: { tool: string }) => {
      await turn.tool(input.tool, {});
      return "done";
    },
  }),
  defineAgent({
    // Learns a pause, has its next call refused, and lingers before it gives up.
    name: "lingering",
    version: "1",
    run: async (turn) => {
      await turn.tool("quick", {});
      await pauseAsked;
      try {
        await turn.tool("quick", {});
      } catch (error) {
        caughtRefusal();
        await new Promise<void>((resolve) => {
          releaseCatch = resolve;
        });
        throw error;
      }
      return "done";
    },
  }),
];
const tools = [quick, ignoring, honouring];

const open = (at: string, workerId: string, withAgents = true): Promise<Runtime> =>
  openRuntime({
    store: at,
    workerId,
    cancelGraceMs: 200,
    ...(withAgents ? { agents, tools } : {}),
  });

const typesOf = async (runtime: Runtime, runId: string) =>
  (await runtime.events(runId)).map((e) => e.event.type);

describe("review findings on cancel, pause and the queue (libsql)", () => {
  it("1: a pause request that meets a cancel before run.paused is appended ends the run cancelled (no TransitionRejected, no ownerless run)", async () => {
    const at = join(tempDir(), "j.db");
    const owner = await open(at, "owner");
    const other = await open(at, "operator", false);
    try {
      let asked!: () => void;
      pauseAsked = new Promise((resolve) => {
        asked = resolve;
      });
      const caught = new Promise<void>((resolve) => {
        caughtRefusal = resolve;
      });
      const run = await owner.submit({ chatId: "c", inputId: "i", agent: "lingering", content: {} });
      expect((await owner.pause(run.runId, { by: "ops" })).accepted).toBe(true);
      asked();
      await caught;
      // The owner knows the pause and holds no call: the cancel lands before its run.paused.
      expect((await other.cancel(run.runId, { by: "ops", note: "stop" })).accepted).toBe(true);
      releaseCatch();
      const result = await run.result;
      expect(result.status).toBe("cancelled");
      expect((await other.run(run.runId))?.status).toBe("cancelled");
      expect((await typesOf(other, run.runId)).slice(-3)).toEqual([
        "run.pause-requested",
        "run.cancel-requested",
        "run.cancelled",
      ]);
      expect((await other.audit()).findings).toEqual([]);
    } finally {
      await other.close();
      await owner.close();
    }
  });

  it("2: a decision on a run held cancelled-in-doubt ends it cancelled and admits the chat's next queued input", async () => {
    const at = join(tempDir(), "j.db");
    const runtime = await open(at, "w");
    try {
      const started = new Promise<void>((resolve) => {
        startedIgnoring = resolve;
      });
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i1",
        agent: "one",
        content: { tool: "ignoring" },
      });
      await started;
      await runtime.cancel(run.runId, { by: "ada" });
      expect((await run.result).status).toBe("held");
      const queued = (await runtime.submit({
        chatId: "c",
        inputId: "i2",
        agent: "one",
        content: { tool: "quick" },
        whenBusy: "queue",
      })) as QueuedHandle;
      expect(queued.queued).toBe(true);
      const version = (await runtime.events(run.runId)).at(-1)!.version;
      const decided = await runtime.decide(run.runId, {
        basedOnVersion: version,
        decidedBy: "ada",
        decision: "confirmed-not-completed",
        note: "checked: nothing was done",
      });
      expect((await decided.result).status).toBe("cancelled");
      // The run's end admitted the next input before its result was given.
      const queue = await runtime.queue("c");
      expect(queue.items).toEqual([]);
      const admitted = await queued.admitted;
      expect(admitted).not.toBeNull();
      expect((await runtime.wait(admitted!)).status).toBe("completed");
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("2: a cancel of a paused run admits the chat's next queued input", async () => {
    const at = join(tempDir(), "j.db");
    const runtime = await open(at, "w");
    try {
      let asked!: () => void;
      pauseAsked = new Promise((resolve) => {
        asked = resolve;
      });
      const caught = new Promise<void>((resolve) => {
        caughtRefusal = resolve;
      });
      const run = await runtime.submit({ chatId: "c", inputId: "i1", agent: "lingering", content: {} });
      await runtime.pause(run.runId, { by: "ops" });
      asked();
      await caught;
      releaseCatch();
      expect((await run.result).status).toBe("paused");
      const queued = (await runtime.submit({
        chatId: "c",
        inputId: "i2",
        agent: "one",
        content: { tool: "quick" },
        whenBusy: "queue",
      })) as QueuedHandle;
      expect(queued.queued).toBe(true);
      expect((await runtime.cancel(run.runId, { by: "ops" })).status).toBe("cancelled");
      expect((await runtime.queue("c")).items).toEqual([]);
      expect((await runtime.wait((await queued.admitted)!)).status).toBe("completed");
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("3: a retried or conflicting interrupt of an input already queued cancels nothing (law 6)", async () => {
    const at = join(tempDir(), "j.db");
    const runtime = await open(at, "w");
    try {
      const a = await runtime.submit({
        chatId: "c",
        inputId: "A",
        agent: "one",
        content: { tool: "honouring" },
      });
      const y = (await runtime.submit({
        chatId: "c",
        inputId: "Y",
        agent: "one",
        content: { tool: "honouring" },
        whenBusy: "queue",
      })) as QueuedHandle;
      const x = (await runtime.submit({
        chatId: "c",
        inputId: "X",
        agent: "one",
        content: { tool: "quick" },
        whenBusy: "interrupt",
      })) as QueuedHandle;
      expect(x.queued).toBe(true);
      expect((await a.result).status).toBe("cancelled");
      const yRun = (await y.admitted)!;
      // The client retries X: the same queued input back, Y's run untouched.
      const again = (await runtime.submit({
        chatId: "c",
        inputId: "X",
        agent: "one",
        content: { tool: "quick" },
        whenBusy: "interrupt",
      })) as QueuedHandle;
      expect(again.reused).toBe(true);
      // Other content under X's ids: refused before anything is done.
      await expect(
        runtime.submit({
          chatId: "c",
          inputId: "X",
          agent: "one",
          content: { tool: "honouring" },
          whenBusy: "interrupt",
        }),
      ).rejects.toBeInstanceOf(InputConflict);
      expect(await typesOf(runtime, yRun)).not.toContain("run.cancel-requested");
      expect((await runtime.run(yRun))?.status).toBe("running");
      expect((await runtime.cancel(yRun, { by: "test" })).accepted).toBe(true);
      expect((await runtime.wait((await x.admitted)!)).status).toBe("completed");
    } finally {
      await runtime.close();
    }
  });

  it("4: two concurrent cancels, or a cancel and a pause: the loser answers accepted false, never TransitionRejected", async () => {
    const at = join(tempDir(), "j.db");
    const owner = await open(at, "owner");
    const ops1 = await open(at, "ops1", false);
    const ops2 = await open(at, "ops2", false);
    try {
      for (const [first, second] of [
        ["cancel", "cancel"],
        ["cancel", "pause"],
      ] as const) {
        const run = await owner.submit({
          chatId: `c-${first}-${second}`,
          inputId: "i",
          agent: "one",
          content: { tool: "honouring" },
        });
        const outcomes = await Promise.all([
          ops1[first](run.runId, { by: "a" }),
          ops2[second](run.runId, { by: "b" }),
        ]);
        expect(outcomes.filter((o) => o.accepted)).toHaveLength(1);
        expect(outcomes.find((o) => !o.accepted)?.message).toMatch(/being cancelled|already ended/);
        expect((await run.result).status).toBe("cancelled");
      }
    } finally {
      await ops1.close();
      await ops2.close();
      await owner.close();
    }
  });
});
