import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import type { AnyToolDef } from "../../src/runtime/define.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Never settles by itself: only an abort (or nothing) ends it. */
const forever = () => new Promise<never>(() => undefined);

const ignoring = defineTool({
  name: "ignoring",
  args: Schema.Struct({}),
  timeoutMs: 50,
  run: async () => forever(),
});

const honouring = defineTool({
  name: "honouring",
  args: Schema.Struct({}),
  timeoutMs: 50,
  run: async (_args, { signal }) =>
    new Promise((_resolve, reject) => {
      // It knows the request was never sent: proof that the abort left nothing behind.
      signal.addEventListener("abort", () =>
        reject(new DefiniteFailure(`not sent: ${(signal.reason as Error).message}`)),
      );
    }),
});

const aborted = defineTool({
  name: "aborted",
  args: Schema.Struct({}),
  timeoutMs: 50,
  run: async (_args, { signal }) =>
    new Promise((_resolve, reject) => {
      signal.addEventListener("abort", () => reject(new Error("AbortError: the request was aborted")));
    }),
});

const agent = defineAgent({
  name: "timed",
  version: "1",
  run: async (turn, input: { tool: string }) => {
    try {
      return await turn.tool(input.tool, {});
    } catch (error) {
      if ((error as { _tag?: string })._tag === "CallFailed") return { failed: true };
      throw error;
    }
  },
});

/** Ignores its signal and answers long after the abort's grace: a late answer, as from a slow remote side. */
const late = defineTool({
  name: "late",
  args: Schema.Struct({}),
  timeoutMs: 50,
  run: async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    return { delivered: true };
  },
});

const tools: AnyToolDef[] = [ignoring, honouring, aborted, late];

describe.each(["libsql", "postgres"] as const)("timeouts on %s", (engine) => {
  const open = async () => {
    if (engine === "postgres") await requirePg();
    return openRuntime({
      store: engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db"),
      agents: [agent],
      tools,
    });
  };

  it("a tool that ignores its signal past timeoutMs leaves the call in doubt: the run is held", async () => {
    const runtime = await open();
    try {
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "timed",
        content: { tool: "ignoring" },
      });
      expect(await run.result).toMatchObject({
        status: "held",
        reasons: [{ code: "indefinite-failure", detail: expect.stringContaining("timeout of 50 ms") }],
      });
      const types = (await runtime.events(run.runId)).map((e) => e.event.type);
      expect(types).not.toContain("call.failed");
      expect(types).not.toContain("call.completed");
    } finally {
      await runtime.close();
    }
  });

  it("law 5: a timed-out tool that answers after all has its answer recorded on the held run, never dropped", async () => {
    const runtime = await open();
    try {
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "timed",
        content: { tool: "late" },
      });
      expect(await run.result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
      const deadline = Date.now() + 30_000;
      let events = await runtime.events(run.runId);
      while (!events.some((e) => e.event.type === "call.completed") && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        events = await runtime.events(run.runId);
      }
      const completed = events.find((e) => e.event.type === "call.completed")?.event;
      expect(completed).toMatchObject({ attempt: 1, result: { delivered: true } });
      // The hold now says the outcome arrived after it, so a person resumes with it.
      expect(events.at(-1)?.event).toMatchObject({
        type: "run.held",
        reasons: [{ detail: expect.stringContaining("arrived after the hold") }],
      });
    } finally {
      await runtime.close();
    }
  });

  it("a tool that honours its signal with a DefiniteFailure proves the call did nothing: it failed", async () => {
    const runtime = await open();
    try {
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "timed",
        content: { tool: "honouring" },
      });
      expect(await run.result).toMatchObject({ status: "completed", output: { failed: true } });
      const failed = (await runtime.events(run.runId)).find((e) => e.event.type === "call.failed")?.event;
      expect(failed).toMatchObject({ error: { message: expect.stringContaining("ran past its timeout") } });
    } finally {
      await runtime.close();
    }
  });

  it("a tool that stops on its signal without proof is in doubt all the same", async () => {
    const runtime = await open();
    try {
      const run = await runtime.submit({
        chatId: "c",
        inputId: "i",
        agent: "timed",
        content: { tool: "aborted" },
      });
      expect(await run.result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
    } finally {
      await runtime.close();
    }
  });

  it("a model call's timeoutMs reaches its function as an aborted signal; a bad timeoutMs is refused", async () => {
    const runtime = await openRuntime({
      store: engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db"),
      agents: [
        defineAgent({
          name: "asker",
          version: "1",
          run: async (turn) => {
            const refused = await turn
              .model("m", {}, async () => "x", { timeoutMs: 0 })
              .catch((error: Error) => error.name);
            const answered = await turn
              .model(
                "slow",
                {},
                (_args, { signal }) =>
                  new Promise((_resolve, reject) => {
                    signal.addEventListener("abort", () =>
                      reject(new DefiniteFailure("cancelled before sending")),
                    );
                  }),
                { timeoutMs: 50 },
              )
              .catch((error: { _tag?: string }) => error._tag);
            return { refused, answered };
          },
        }),
      ],
      tools: [],
    });
    try {
      const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: {} });
      expect(await run.result).toMatchObject({
        status: "completed",
        output: { refused: "TypeError", answered: "CallFailed" },
      });
      expect(() =>
        defineTool({ name: "t", args: Schema.Struct({}), timeoutMs: -5, run: async () => 1 }),
      ).toThrow(/timeoutMs of tool "t" is invalid/);
    } finally {
      await runtime.close();
    }
  });
});
