import { join } from "node:path";
import * as Schema from "effect/Schema";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("child calls run again on purpose", () => {
  it("F25: a retry grant on a failed child call admits a new child run, which really runs; the first child stays as it ended", async () => {
    const db = join(tempDir(), "j.db");
    let childRuns = 0;
    const child = defineAgent({
      name: "child",
      version: "1",
      run: async () => {
        childRuns++;
        if (childRuns === 1) throw new DefiniteFailure("the upstream said no");
        return { answer: childRuns };
      },
    });
    const parent = defineAgent({
      name: "parent",
      version: "1",
      run: async (turn) => turn.child("child", { q: 1 }),
    });
    const rt = await openRuntime({ store: db, agents: [parent, child] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "parent", content: null });
    const held = await run.result;
    expect(held).toMatchObject({
      status: "held",
      reasons: [{ code: "decision-needed", callId: `${run.runId}/0` }],
    });
    const { result } = await rt.grantRetry(run.runId, `${run.runId}/0`, { attempts: 1, grantedBy: "ada" });
    expect(await result).toMatchObject({ status: "completed", output: { answer: 2 } });
    expect(childRuns).toBe(2);
    const children = (await rt.runs()).filter((r) => r.agent === "child@1");
    expect(children.map((r) => [r.inputId, r.status]).sort((x, y) => (x[0]! < y[0]! ? -1 : 1))).toEqual([
      [`${run.runId}/0`, "failed"],
      [`${run.runId}/0#2`, "completed"],
    ]);
    expect((await rt.audit()).findings).toEqual([]);
    await rt.close();
  });
});

describe("a child call in doubt whose child run exists", () => {
  it("refuses confirmed-not-completed (it would start a second child) and writes nothing; confirmed-completed with the child's output goes on", async () => {
    const db = join(tempDir(), "j.db");
    let sends = 0;
    const send = defineTool({
      name: "send",
      args: Schema.Struct({ to: Schema.String }),
      run: async () => {
        sends++;
        throw new Error("connection reset");
      },
    });
    const child = defineAgent({
      name: "child",
      version: "1",
      run: async (turn) => turn.tool("send", { to: "ada" }),
    });
    const parent = defineAgent({
      name: "parent",
      version: "1",
      run: async (turn) => turn.child("child", { q: 1 }),
    });
    const rt = await openRuntime({ store: db, agents: [parent, child], tools: [send] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "parent", content: null });
    expect(await run.result).toMatchObject({ status: "held" });
    const callId = `${run.runId}/0`;
    const childRun = (await rt.runs()).find((r) => r.agent === "child@1");
    expect(childRun).toMatchObject({ status: "held" });
    const before = (await rt.run(run.runId))!;
    await expect(
      rt.decide(run.runId, {
        basedOnVersion: before.version,
        decidedBy: "ada",
        calls: { [callId]: { decision: "confirmed-not-completed", note: "I think it did not run" } },
      }),
    ).rejects.toThrow(`its child run ${childRun?.runId} was admitted`);
    expect((await rt.run(run.runId))?.version).toBe(before.version);

    const { result } = await rt.decide(run.runId, {
      basedOnVersion: before.version,
      decidedBy: "ada",
      calls: {
        [callId]: { decision: "confirmed-completed", note: "the child did it", result: { sent: true } },
      },
    });
    expect(await result).toMatchObject({ status: "completed", output: { sent: true } });
    expect((await rt.runs()).filter((r) => r.agent === "child@1")).toHaveLength(1);
    expect(sends).toBe(1);
    await rt.close();
  });
});
