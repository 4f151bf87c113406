import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { CallFailed } from "../../src/runtime/errors.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const setup = (calls: { n: number }, failWith: () => Error) => {
  const send = defineTool({
    name: "send",
    args: Schema.Struct({ to: Schema.String }),
    run: async () => {
      calls.n++;
      throw failWith();
    },
  });
  const agent = defineAgent({
    name: "sender",
    version: "1",
    run: async (turn) => {
      try {
        await turn.tool(send, { to: "ada@example.com" });
        return "sent";
      } catch (error) {
        if (error instanceof CallFailed) return `not sent: ${error.error.message}`;
        throw error;
      }
    },
  });
  return { tools: [send], agents: [agent] };
};

describe("law 4 — timeouts prove nothing", () => {
  it("a timeout leaves the call in doubt and holds the run; nothing is retried, not even after a restart", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const calls = { n: 0 };
    const timeout = () => Object.assign(new Error("request timed out after 30000 ms"), { code: "ETIMEDOUT" });
    const rt = await openRuntime({ store: db, ...setup(calls, timeout) });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "sender", content: null });
    const result = await run.result;
    expect(result.status).toBe("held");
    if (result.status !== "held") throw new Error("unreachable");
    expect(result.reasons[0]?.code).toBe("indefinite-failure");
    const types = (await rt.events(run.runId)).map((e) => e.event.type);
    expect(types).toEqual(["run.admitted", "call.intended", "run.held"]);
    expect(types).not.toContain("call.failed");
    await rt.close();

    const again = await openRuntime({ store: db, ...setup(calls, timeout) });
    expect(again.recovery.held.map((h) => h.runId)).toEqual([run.runId]);
    expect(calls.n).toBe(1);
    expect((await again.runs())[0]?.status).toBe("held");
    await again.close();
  });

  it("only a definite failure is an outcome: call.failed { definite: true } is recorded and the agent sees it", async () => {
    const dir = tempDir();
    const calls = { n: 0 };
    const rt = await openRuntime({
      store: join(dir, "journal.db"),
      ...setup(calls, () => new DefiniteFailure("mailbox does not exist (550)")),
    });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "sender", content: null });
    const result = await run.result;
    expect(result).toMatchObject({ status: "completed", output: "not sent: mailbox does not exist (550)" });
    const failed = (await rt.events(run.runId)).find((e) => e.event.type === "call.failed")?.event;
    expect(failed).toMatchObject({ type: "call.failed", definite: true });
    await rt.close();
  });
});
