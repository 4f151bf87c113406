import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const SECRET = "k3y-Registered-Secret-9f8e7d6c";
const TOKEN = "sk-ant-abcdefghijklmnopqrstuvwxyz0123456789";

/** Every byte under `dir`: the database, its WAL, the anchor. */
const rawBytes = (dir: string): Buffer => {
  const out: Buffer[] = [];
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isFile()) out.push(readFileSync(p));
  }
  return Buffer.concat(out);
};

describe("what people write is masked before it is stored (law 8)", () => {
  it("F4: decision notes, decidedBy, retry notes, grantedBy and plan authors never reach the disk with a secret in them", async () => {
    const dir = tempDir();
    let fail = true;
    const flaky = defineTool({
      name: "flaky",
      args: Schema.Struct({ n: Schema.Number }),
      run: async ({ n }) => {
        if (n === 1) throw new Error("socket hang up");
        if (fail) throw new DefiniteFailure("503 from the provider");
        return "ok";
      },
    });
    const agent = defineAgent({
      name: "a",
      version: "1",
      run: async (turn, input: { n: number }) => turn.tool(flaky, { n: input.n }),
    });
    const rt = await openRuntime({
      store: join(dir, "j.db"),
      agents: [agent],
      tools: [flaky],
      secrets: { SECRET },
    });
    const held = await rt.submit({ chatId: "c1", inputId: "i", agent: "a", content: { n: 1 } });
    expect((await held.result).status).toBe("held");
    await (
      await rt.decide(held.runId, {
        basedOnVersion: (await rt.events(held.runId)).length,
        decidedBy: `ops ${SECRET}`,
        decision: "stop",
        note: `checked with key ${SECRET} and ${TOKEN}`,
      })
    ).result;
    const failed = await rt.submit({ chatId: "c2", inputId: "i", agent: "a", content: { n: 2 } });
    expect((await failed.result).status).toBe("held");
    fail = false;
    await (
      await rt.grantRetry(failed.runId, `${failed.runId}/0`, {
        attempts: 1,
        grantedBy: `ops ${SECRET}`,
        note: `the provider's key ${TOKEN} works again`,
      })
    ).result;
    await rt.documents.replace("c3", {
      expectedRevision: 0,
      value: { title: "t", items: [] },
      by: `ada ${SECRET}`,
    });
    const decided = (await rt.events(held.runId)).find((e) => e.event.type === "decision.recorded")?.event;
    expect(JSON.stringify(decided)).toContain("«secret:SECRET»");
    await rt.close();
    const bytes = rawBytes(dir);
    expect(bytes.includes(Buffer.from(SECRET))).toBe(false);
    expect(bytes.includes(Buffer.from(TOKEN))).toBe(false);
  });
});
