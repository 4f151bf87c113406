import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import {
  CheckpointInvalid,
  defineAgent,
  defineTool,
  openReader,
  openRuntime,
  type Runtime,
} from "../../src/index.js";
import { tamper } from "../audit/tamper.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const SECRET = "s3cret-Value-For-The-Checkpoint-77";

const note = defineTool({
  name: "note",
  args: Schema.Struct({ text: Schema.String }),
  run: async ({ text }) => ({ noted: text }),
});

/** Saves one checkpoint per step it is asked for, each after a tool call; with no steps, none. */
const stepper = defineAgent({
  name: "stepper",
  version: "1",
  run: async (turn, input: { steps: ReadonlyArray<string> }) => {
    for (const step of input.steps) {
      await turn.tool(note, { text: step });
      await turn.checkpoint({ step, note: `signed with ${SECRET}` });
    }
    return input.steps.length;
  },
});

const withRuntime = async <T>(db: string, fn: (runtime: Runtime) => Promise<T>): Promise<T> => {
  const runtime = await openRuntime({
    store: db,
    agents: [stepper],
    tools: [note],
    secrets: { TOKEN: SECRET },
  });
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
};

const submit = async (runtime: Runtime, inputId: string, steps: string[]) => {
  const run = await runtime.submit({ chatId: "c1", inputId, agent: "stepper", content: { steps } });
  expect(await run.result).toMatchObject({ status: "completed" });
  return run.runId;
};

describe("runtime.checkpoint(chatId)", () => {
  it("is null for a chat that is not in the journal, and for a chat whose runs saved none", async () => {
    const db = join(tempDir(), "journal.db");
    await withRuntime(db, async (runtime) => {
      expect(await runtime.checkpoint("nobody")).toBeNull();
      await submit(runtime, "m1", []);
      expect(await runtime.checkpoint("c1")).toBeNull();
    });
  });

  it("is the chat's latest checkpoint: the run and call it followed, the state masked as stored, its digest", async () => {
    const db = join(tempDir(), "journal.db");
    await withRuntime(db, async (runtime) => {
      const runId = await submit(runtime, "m1", ["draft", "send"]);
      expect(await runtime.checkpoint("c1")).toEqual({
        chatId: "c1",
        runId,
        afterSeq: 1,
        state: { step: "send", note: "signed with «secret:TOKEN»" },
        digest: expect.stringMatching(/^[0-9a-f]{64}$/),
      });
    });
  });

  it("a later run of the chat that saves no checkpoint keeps the previous one", async () => {
    const db = join(tempDir(), "journal.db");
    await withRuntime(db, async (runtime) => {
      const first = await submit(runtime, "m1", ["draft"]);
      await submit(runtime, "m2", []);
      expect(await runtime.checkpoint("c1")).toMatchObject({
        runId: first,
        afterSeq: 0,
        state: { step: "draft" },
      });
    });
  });

  it("a read-only reader gives the same checkpoint", async () => {
    const db = join(tempDir(), "journal.db");
    const saved = await withRuntime(db, async (runtime) => {
      await submit(runtime, "m1", ["draft"]);
      return runtime.checkpoint("c1");
    });
    const reader = await openReader({ store: db });
    try {
      expect(await reader.checkpoint("c1")).toEqual(saved);
    } finally {
      await reader.close();
    }
  });

  it("a stored checkpoint that does not match its digest is CheckpointInvalid, naming chat, run and call (law 11)", async () => {
    const db = join(tempDir(), "journal.db");
    const runId = await withRuntime(db, (runtime) => submit(runtime, "m1", ["draft"]));
    tamper(db, (sql) =>
      sql
        .prepare(
          "UPDATE projections SET value = json_set(value, '$.checkpoint.state.step', 'forged') WHERE name = 'chats' AND key = 'c1'",
        )
        .run(),
    );
    const reader = await openReader({ store: db });
    try {
      const error = await reader.checkpoint("c1").then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(CheckpointInvalid);
      expect(error).toMatchObject({ chatId: "c1", runId, afterSeq: 0 });
      expect((error as Error).message).toContain("run `holdfast audit`");
    } finally {
      await reader.close();
    }
  });
});
