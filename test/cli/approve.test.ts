import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { ApprovalDenied, defineAgent, defineTool, openRuntime, type Runtime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { runCli } from "./cliProcess.js";

const tempDir = useTempDir();

const effects: string[] = [];
const pay = defineTool({
  name: "pay",
  description: "Pays an invoice",
  args: Schema.Struct({ invoice: Schema.String, amount: Schema.Number }),
  approval: { editable: true },
  run: async ({ invoice, amount }) => {
    effects.push(`${invoice} ${amount}`);
    return "paid";
  },
});

const payer = defineAgent({
  name: "payer",
  version: "1",
  run: async (turn) => {
    try {
      return await turn.tool(pay, { invoice: "INV-1", amount: 500 });
    } catch (error) {
      if (error instanceof ApprovalDenied) return `denied: ${error.note}`;
      throw error;
    }
  },
});

const parked = async (runtime: Runtime, chatId: string) => {
  const handle = await runtime.submit({ chatId, inputId: "i", agent: "payer", content: null });
  expect(await handle.result).toMatchObject({ status: "waiting", wait: "approval" });
  return handle.runId;
};

const until = async (runtime: Runtime, runId: string, status: string) => {
  while ((await runtime.run(runId))?.status !== status) await new Promise((r) => setTimeout(r, 50));
};

describe("holdfast approve / deny", () => {
  it("show and runs say a run awaits approval; approve with edited args runs the effect once; a stale one is refused", async () => {
    effects.length = 0;
    const db = join(tempDir(), "journal.db");
    const runtime = await openRuntime({ store: db, agents: [payer], tools: [pay], tracing: false });
    try {
      const runId = await parked(runtime, "c1");
      const runs = await runCli(["runs", "--db", db]);
      expect(runs.stdout).toContain("awaiting approval");
      const show = await runCli(["show", runId, "--db", db]);
      expect(show.stdout).toContain(`awaiting approval: ${runId}/0 tool "pay"`);
      expect(show.stdout).toContain("Pays an invoice");
      const version = (await runtime.events(runId)).at(-1)!.version;
      expect(show.stdout).toContain(`approve ${runId} 0 --based-on ${version}`);
      const stale = await runCli([
        "approve",
        runId,
        "0",
        "--based-on",
        String(version - 1),
        "--by",
        "ada",
        "--db",
        db,
      ]);
      expect(stale.code).toBe(1);
      expect(stale.stderr).toContain("nothing was written");
      expect(stale.stderr).toContain(`--based-on ${version}`);
      const badJson = await runCli([
        "approve",
        runId,
        "0",
        "--based-on",
        String(version),
        "--args",
        "{",
        "--db",
        db,
      ]);
      expect(badJson.code).toBe(1);
      expect(badJson.stderr).toContain("not JSON");
      const ok = await runCli([
        "approve",
        runId,
        "0",
        "--based-on",
        String(version),
        "--by",
        "ada",
        "--note",
        "half now",
        "--args",
        '{"invoice":"INV-1","amount":250}',
        "--db",
        db,
        "--json",
      ]);
      expect(ok.code).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ decision: "approved", edited: true, by: "ada" });
      await until(runtime, runId, "completed");
      expect(effects).toEqual(["INV-1 250"]);
      const again = await runCli([
        "approve",
        runId,
        "0",
        "--based-on",
        String(version),
        "--by",
        "ada",
        "--db",
        db,
      ]);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain("does not await approval");
    } finally {
      await runtime.close();
    }
  });

  it("deny needs --note; the agent sees the note", async () => {
    effects.length = 0;
    const db = join(tempDir(), "journal.db");
    const runtime = await openRuntime({ store: db, agents: [payer], tools: [pay], tracing: false });
    try {
      const runId = await parked(runtime, "c1");
      const version = String((await runtime.events(runId)).at(-1)!.version);
      const bare = await runCli([
        "deny",
        runId,
        `${runId}/0`,
        "--based-on",
        version,
        "--by",
        "bob",
        "--db",
        db,
      ]);
      expect(bare.code).toBe(2);
      expect(bare.stderr).toContain("--note");
      const denied = await runCli([
        "deny",
        runId,
        `${runId}/0`,
        "--based-on",
        version,
        "--by",
        "bob",
        "--note",
        "over budget",
        "--db",
        db,
      ]);
      expect(denied.code).toBe(0);
      expect(denied.stdout).toContain("denied");
      await until(runtime, runId, "completed");
      expect(await runtime.wait(runId)).toMatchObject({ output: "denied: over budget" });
      expect(effects).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});
