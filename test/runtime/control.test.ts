import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openRuntime,
  RunCancelled,
  type Runtime,
  type RuntimeOptions,
} from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Resolvers for the calls under way, by tool: a test waits until a call has started, then acts. */
const started = new Map<string, Array<() => void>>();
const whenStarted = (tool: string): Promise<void> =>
  new Promise((resolve) => {
    started.set(tool, [...(started.get(tool) ?? []), resolve]);
  });
const tellStarted = (tool: string) => {
  for (const resolve of started.get(tool) ?? []) resolve();
  started.delete(tool);
};
/** Releases the `gated` calls waiting. */
let openGate: () => void = () => undefined;
const effects: string[] = [];

const honouring = defineTool({
  name: "honouring",
  args: Schema.Struct({}),
  run: async (_args, { signal }) =>
    new Promise((_resolve, reject) => {
      tellStarted("honouring");
      // It knows the request was never sent: the abort leaves nothing behind.
      signal.addEventListener("abort", () => reject(new DefiniteFailure("aborted before sending")));
    }),
});

const ignoring = defineTool({
  name: "ignoring",
  args: Schema.Struct({}),
  run: async () => {
    tellStarted("ignoring");
    return new Promise<never>(() => undefined);
  },
});

const gated = defineTool({
  name: "gated",
  args: Schema.Struct({ step: Schema.String }),
  run: async ({ step }) => {
    tellStarted("gated");
    await new Promise<void>((resolve) => {
      openGate = resolve;
    });
    effects.push(`gated:${step}`);
    return { step };
  },
});

const note = defineTool({
  name: "note",
  args: Schema.Struct({ text: Schema.String }),
  run: async ({ text }) => {
    effects.push(`note:${text}`);
    return { noted: text };
  },
});

const quick = defineTool({
  name: "quick",
  args: Schema.Struct({ step: Schema.String }),
  run: async ({ step }) => {
    effects.push(`quick:${step}`);
    return { step };
  },
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
    name: "tidy",
    version: "1",
    run: async (turn) => {
      try {
        await turn.tool("honouring", {});
      } catch (error) {
        if (turn.signal.aborted) {
          const reason = turn.signal.reason;
          await turn.cleanup(() => turn.tool("note", { text: "cleaned up" }));
          // Outside the clean-up, a new call is refused.
          await turn.tool("quick", { step: "after" }).catch((refused: unknown) => {
            effects.push(refused instanceof RunCancelled ? "refused" : "not refused");
          });
          throw reason;
        }
        throw error;
      }
      return "done";
    },
  }),
  defineAgent({
    name: "steps",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const a = await turn.tool("gated", { step: `${input.label}-a` });
      const b = await turn.tool("quick", { step: `${input.label}-b` });
      return { a, b };
    },
  }),
  defineAgent({
    name: "asker",
    version: "1",
    run: async (turn) =>
      turn.model(
        "ask",
        {},
        (_args, { signal }) =>
          new Promise((_resolve, reject) => {
            tellStarted("ask");
            // As the AI SDK does: an abort is an AbortError, which proves nothing.
            signal.addEventListener("abort", () => reject(new Error("AbortError: the request was aborted")));
          }),
        { inDoubt: "replay" },
      ),
  }),
  defineAgent({
    name: "flaky",
    version: "1",
    run: async (turn) => {
      await turn.model("m", {}, async () => {
        throw new Error("connection reset");
      });
      return "never";
    },
  }),
];
const tools = [honouring, ignoring, gated, note, quick];

const typesOf = async (runtime: Runtime, runId: string) =>
  (await runtime.events(runId)).map((e) => e.event.type);

describe.each(["libsql", "postgres"] as const)("cancel and pause on %s", (engine) => {
  const store = async () => {
    if (engine === "postgres") await requirePg();
    return engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db");
  };
  const open = (at: string, options: Partial<RuntimeOptions> = {}) =>
    openRuntime({ store: at, agents, tools, cancelGraceMs: 300, ...options });

  it("cancel with a call in flight whose tool honours the signal: the run ends cancelled, the call's outcome recorded", async () => {
    const runtime = await open(await store());
    try {
      const going = whenStarted("honouring");
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "one",
        content: { tool: "honouring" },
      });
      await going;
      const outcome = await runtime.cancel(run.runId, { by: "ada", note: "changed my mind" });
      expect(outcome).toMatchObject({ accepted: true, runId: run.runId, status: "cancel-requested" });
      expect(await run.result).toEqual({
        status: "cancelled",
        runId: run.runId,
        by: "ada",
        note: "changed my mind",
      });
      const types = await typesOf(runtime, run.runId);
      expect(types).toContain("call.failed");
      expect(types.slice(-1)).toEqual(["run.cancelled"]);
      expect((await runtime.run(run.runId))?.status).toBe("cancelled");
      // The chat is free again.
      openGateSoon();
      const next = await runtime.submit({
        chatId: "c",
        inputId: "i2",
        agent: "steps",
        content: { label: "n" },
      });
      expect((await next.result).status).toBe("completed");
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("cancel right after submit, before or after the first intent: the run ends cancelled", async () => {
    const runtime = await open(await store());
    try {
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "one",
        content: { tool: "honouring" },
      });
      await runtime.cancel(run.runId, { by: "ada" });
      expect((await run.result).status).toBe("cancelled");
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("cancel of an aborted model call declared replayable: authorized as recovery would, and the run ends cancelled", async () => {
    const runtime = await open(await store());
    try {
      const going = whenStarted("ask");
      const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: {} });
      await going;
      await runtime.cancel(run.runId, { by: "ada" });
      expect((await run.result).status).toBe("cancelled");
      const events = (await runtime.events(run.runId)).map((e) => e.event);
      expect(events.map((e) => e.type).slice(-3)).toEqual([
        "run.cancel-requested",
        "call.replay-authorized",
        "run.cancelled",
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("cancel with a call in flight whose tool ignores the signal: held cancelled-in-doubt after the grace, never forgotten", async () => {
    const runtime = await open(await store());
    try {
      const going = whenStarted("ignoring");
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "one",
        content: { tool: "ignoring" },
      });
      await going;
      await runtime.cancel(run.runId, { by: "ada", note: "" });
      const result = await run.result;
      expect(result).toMatchObject({
        status: "held",
        reasons: [{ code: "cancelled-in-doubt", callId: `${run.runId}/0` }],
      });
      // The held run is then stopped by the cancel, as a `stop` decision.
      expect(await runtime.cancel(run.runId, { by: "ada", note: "give up" })).toMatchObject({
        accepted: true,
        status: "stopped",
      });
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("cancel from another runtime reaches the owner, which ends the run cancelled", async () => {
    const at = await store();
    const owner = await open(at, { workerId: "owner" });
    const other = await openRuntime({ store: at, workerId: "operator" });
    try {
      const going = whenStarted("honouring");
      const run = await owner.submit({
        chatId: "c",
        inputId: "i",
        agent: "one",
        content: { tool: "honouring" },
      });
      await going;
      expect(await other.cancel(run.runId, { by: "ops", note: "runaway" })).toMatchObject({
        accepted: true,
        status: "cancel-requested",
      });
      expect(await run.result).toMatchObject({ status: "cancelled", by: "ops", note: "runaway" });
      expect((await other.audit()).findings).toEqual([]);
    } finally {
      await other.close();
      await owner.close();
    }
  });

  it("cancel of a finished run is a no-op that says so; of a held run, the stop decision", async () => {
    const runtime = await open(await store());
    try {
      const done = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "one",
        content: { tool: "quick" },
      });
      // `quick` needs a step: the run fails on its arguments, which is also an end.
      await done.result;
      const before = await typesOf(runtime, done.runId);
      const outcome = await runtime.cancel(done.runId, { by: "ada" });
      expect(outcome.accepted).toBe(false);
      expect(outcome.message).toContain("already ended");
      expect(await typesOf(runtime, done.runId)).toEqual(before);

      const held = await runtime.submit({ chatId: "h", inputId: "i", agent: "flaky", content: {} });
      expect((await held.result).status).toBe("held");
      expect(await runtime.cancel(held.runId, { by: "ada", note: "not needed" })).toMatchObject({
        accepted: true,
        status: "stopped",
      });
      const events = await runtime.events(held.runId);
      expect(events.map((e) => e.event.type).slice(-2)).toEqual(["decision.recorded", "run.stopped"]);
      expect(events.at(-2)?.event).toMatchObject({ decidedBy: "ada", note: "not needed", run: "stop" });
      await expect(runtime.cancel("nope", { by: "ada" })).rejects.toMatchObject({ _tag: "RunNotFound" });
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("the agent sees turn.signal aborted and cleans up with a journaled call; other new calls are refused", async () => {
    effects.length = 0;
    const runtime = await open(await store());
    try {
      const going = whenStarted("honouring");
      const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "tidy", content: {} });
      await going;
      await runtime.cancel(run.runId, { by: "ada" });
      expect((await run.result).status).toBe("cancelled");
      expect(effects).toEqual(["note:cleaned up", "refused"]);
      const events = await runtime.events(run.runId);
      expect(events.filter((e) => e.event.type === "call.intended").map((e) => e.event)).toMatchObject([
        { name: "honouring" },
        { name: "note" },
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("pause: the in-flight call settles, the run is paused, stays paused across a restart, and resumes to completed elsewhere", async () => {
    effects.length = 0;
    const at = await store();
    const first = await open(at, { workerId: "first" });
    const going = whenStarted("gated");
    const run = await first.submit({ chatId: "c", inputId: "i", agent: "steps", content: { label: "p" } });
    await going;
    expect(await first.pause(run.runId, { by: "ada", note: "budget" })).toMatchObject({
      accepted: true,
      status: "pause-requested",
    });
    openGate();
    expect(await run.result).toEqual({ status: "paused", runId: run.runId });
    expect(effects).toEqual(["gated:p-a"]);
    expect((await first.run(run.runId))?.status).toBe("paused");
    // The chat stays busy.
    await expect(
      first.submit({ chatId: "c", inputId: "i2", agent: "steps", content: { label: "x" } }),
    ).rejects.toMatchObject({ _tag: "ActiveRunExists" });
    await first.close();

    // A restart: recovery leaves it paused.
    const second = await open(at, { workerId: "second" });
    try {
      expect(second.recovery.resumed).toEqual([]);
      await (await second.recover()).done;
      expect((await second.run(run.runId))?.status).toBe("paused");
      expect(await second.pause(run.runId, { by: "ada" })).toMatchObject({ accepted: false });
      const resumed = await second.resume(run.runId, { by: "ada" });
      expect(resumed).toMatchObject({ accepted: true, status: "running" });
      expect(await resumed.result).toMatchObject({ status: "completed", output: { b: { step: "p-b" } } });
      // The first call ran once: the resume served it from the journal.
      expect(effects).toEqual(["gated:p-a", "quick:p-b"]);
      expect(await second.resume(run.runId, { by: "ada" })).toMatchObject({ accepted: false });
      expect((await second.audit()).findings).toEqual([]);
    } finally {
      await second.close();
    }
  });

  it("a paused run is cancelled at once; a run resumed by a runtime without its agent is taken by a worker's recovery", async () => {
    const at = await store();
    const worker = await open(at, { workerId: "worker" });
    const operator = await openRuntime({ store: at, workerId: "operator" });
    try {
      const going = whenStarted("gated");
      const run = await worker.submit({ chatId: "c", inputId: "i", agent: "steps", content: { label: "r" } });
      await going;
      await operator.pause(run.runId, { by: "ops" });
      openGate();
      expect((await run.result).status).toBe("paused");
      const resumed = await operator.resume(run.runId, { by: "ops" });
      expect(resumed.accepted).toBe(true);
      const report = await worker.recover();
      expect(report.resumed).toEqual([run.runId]);
      expect((await report.done)[0]).toMatchObject({ status: "completed" });

      const going2 = whenStarted("gated");
      const second = await worker.submit({
        chatId: "d",
        inputId: "i",
        agent: "steps",
        content: { label: "s" },
      });
      await going2;
      await operator.pause(second.runId, { by: "ops" });
      openGate();
      expect((await second.result).status).toBe("paused");
      expect(await operator.cancel(second.runId, { by: "ops", note: "no" })).toMatchObject({
        accepted: true,
        status: "cancelled",
      });
      expect((await worker.run(second.runId))?.status).toBe("cancelled");
      expect((await operator.audit()).findings).toEqual([]);
    } finally {
      await operator.close();
      await worker.close();
    }
  });
});

/** Open the gate once the next `gated` call is waiting at it. */
const openGateSoon = () => {
  void whenStarted("gated").then(() => openGate());
};
