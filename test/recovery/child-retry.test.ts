import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, openRuntime } from "../../src/index.js";
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
