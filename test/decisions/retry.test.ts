import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openRuntime,
  RetryLimitExceeded,
  RetryNotAllowed,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** A model provider that answers 503 (a definite refusal) the first `failures` times. */
const setup = async (failures: number) => {
  let calls = 0;
  const llm = defineTool({
    name: "llm",
    args: Schema.Struct({ prompt: Schema.String }),
    run: async ({ prompt }) => {
      calls++;
      if (calls <= failures) throw new DefiniteFailure(`provider answered 503 (call ${calls})`);
      return `answer to ${prompt}`;
    },
  });
  const flaky = defineTool({
    name: "flaky",
    args: Schema.Struct({}),
    run: async () => {
      throw new Error("socket hang up");
    },
  });
  const agent = defineAgent({
    name: "asker",
    version: "1",
    run: async (turn, input: { mode: string }) => {
      const first = await turn.tool(llm, { prompt: "hello" });
      if (input.mode === "doubt") await turn.tool(flaky, {});
      return first;
    },
  });
  const runtime = await openRuntime({
    store: join(tempDir(), "j.db"),
    agents: [agent],
    tools: [llm, flaky],
    retry: { maxAttempts: 3 },
  });
  return { runtime, calls: () => calls };
};

describe("retry grants", () => {
  it("an unhandled definite failure holds the run; a grant retries it and each attempt is recorded", async () => {
    const { runtime, calls } = await setup(2);
    const run = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "asker",
      content: { mode: "plain" },
    });
    const held = await run.result;
    expect(held).toMatchObject({
      status: "held",
      reasons: [{ code: "decision-needed", callId: `${run.runId}/0` }],
    });
    expect(calls()).toBe(1);
    const { result } = await runtime.grantRetry(run.runId, `${run.runId}/0`, {
      attempts: 2,
      grantedBy: "ada",
      note: "provider is back",
    });
    expect(await result).toMatchObject({ status: "completed", output: "answer to hello" });
    expect(calls()).toBe(3);
    const events = (await runtime.events(run.runId)).map((e) => e.event);
    expect(
      events
        .filter((e) => e.type === "call.intended")
        .map((e) => (e.type === "call.intended" ? e.attempt : 0)),
    ).toEqual([1, 2, 3]);
    expect(events.filter((e) => e.type === "call.failed")).toHaveLength(2);
    expect(events.filter((e) => e.type === "retry.granted")).toHaveLength(1);
    await runtime.close();
  });

  it("a grant above the maximum is refused and writes nothing", async () => {
    const { runtime } = await setup(5);
    const run = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "asker",
      content: { mode: "plain" },
    });
    await run.result;
    const before = (await runtime.events(run.runId)).length;
    await expect(
      runtime.grantRetry(run.runId, `${run.runId}/0`, { attempts: 4, grantedBy: "ada" }),
    ).rejects.toBeInstanceOf(RetryLimitExceeded);
    expect((await runtime.events(run.runId)).length).toBe(before);
    await runtime.close();
  });

  it("a grant on a completed call or an in-doubt call is refused", async () => {
    const { runtime } = await setup(0);
    const run = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "asker",
      content: { mode: "doubt" },
    });
    expect((await run.result).status).toBe("held");
    const before = (await runtime.events(run.runId)).length;
    await expect(
      runtime.grantRetry(run.runId, `${run.runId}/0`, { attempts: 1, grantedBy: "ada" }),
    ).rejects.toMatchObject({
      _tag: "RetryNotAllowed",
      status: "completed",
    });
    await expect(
      runtime.grantRetry(run.runId, `${run.runId}/1`, { attempts: 1, grantedBy: "ada" }),
    ).rejects.toBeInstanceOf(RetryNotAllowed);
    expect((await runtime.events(run.runId)).length).toBe(before);
    await runtime.close();
  });
});
