import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defineAgent, InvalidInput, openRuntime } from "../../src/index.js";
import { rowsOf, tamper } from "../audit/tamper.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("deciding a run whose history cannot be trusted (law 11)", () => {
  it("F26: a decision re-verifies the chain first: a run with a broken chain takes only stop, and stays flagged until then", async () => {
    const db = join(tempDir(), "j.db");
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn) =>
        turn.model("think", { q: 1 }, async () => {
          throw new Error("the model provider timed out");
        }),
    });
    const rt = await openRuntime({ store: db, agents: [agent] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: null });
    expect((await run.result).status).toBe("held");
    await rt.close();
    // Someone edits the intent's stored arguments: the chain no longer verifies.
    tamper(db, (raw) => {
      const intent = rowsOf(raw, `run-${run.runId}`).find((r) => r.type === "call.intended")!;
      raw
        .prepare("UPDATE events SET data = replace(data, '\"q\":1', '\"q\":2') WHERE position = ?")
        .run(intent.position);
    });
    const again = await openRuntime({ store: db, agents: [agent] });
    const version = (await again.events(run.runId)).length;
    const refused = await again
      .decide(run.runId, {
        basedOnVersion: version,
        decidedBy: "ada",
        decision: "new-attempt",
      })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidInput);
    expect((refused as Error).message).toMatch(/history cannot be trusted, so only `stop` is accepted/);
    expect(await again.events(run.runId)).toHaveLength(version);
    const { result } = await again.decide(run.runId, {
      basedOnVersion: version,
      decidedBy: "ada",
      decision: "stop",
    });
    expect(await result).toMatchObject({ status: "stopped" });
    await again.close();
  });
});
