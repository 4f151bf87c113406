import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openRuntime } from "../../src/index.js";
import { runCli, useTempDir } from "../cli/cliProcess.js";
import { promptAgent, SECRET, secrets, tools } from "./promptAgent.js";

const tempDir = useTempDir();
const HERE = import.meta.dirname;

const recordRun = async (dir: string) => {
  const store = join(dir, "journal.db");
  process.env.HOLDFAST_REPLAY_WITNESS = join(dir, "witness.txt");
  const runtime = await openRuntime({ store, agents: [promptAgent("Polish it")], tools, secrets });
  const run = await runtime.submit({
    chatId: "c1",
    inputId: "m1",
    agent: "writer",
    content: { topic: "tides" },
  });
  await run.result;
  await runtime.close();
  return { store, runId: run.runId };
};

describe("holdfast replay", () => {
  it("replays the demo's journal with the demo's code: every run the same, exit 0", async () => {
    const db = join(tempDir(), "journal.db");
    expect((await runCli(["demo", "--db", db])).code).toBe(0);
    expect((await runCli(["demo", "--db", db])).code).toBe(0);
    const result = await runCli(["replay", "--agents", join(HERE, "demo-agents.ts"), "--db", db]);
    expect(result.stdout).toContain("2 run(s) replayed: 2 same, 0 continue live, 0 diverge, 0 not replayed");
    expect(result.stderr).toBe("replayed 2/2 runs\n");
    expect(result.code).toBe(0);
  });

  it("a changed prompt exits 1 and shows the call, both arguments masked, as a table and as JSON", async () => {
    const { store, runId } = await recordRun(tempDir());
    const clean = await runCli(["replay", "--agents", join(HERE, "prompt-v1.ts"), "--store", store]);
    expect(clean.code).toBe(0);
    const text = await runCli(["replay", "--agents", join(HERE, "prompt-v2.ts"), "--db", store]);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain(`run ${runId} diverges at call 2 (${runId}/2)`);
    expect(text.stdout).toContain('"instruction":"Polish it"');
    expect(text.stdout).toContain('"instruction":"Polish it, and make it shorter"');
    expect(text.stdout).toContain(`«secret:${SECRET.name}»`);
    expect(text.stdout).not.toContain(SECRET.value);
    const json = await runCli(["replay", "--agents", join(HERE, "prompt-v2.ts"), "--db", store, "--json"]);
    expect(json.code).toBe(1);
    const report = JSON.parse(json.stdout) as { divergences: number; runs: Array<{ result: string }> };
    expect(report.divergences).toBe(1);
    expect(report.runs).toEqual([expect.objectContaining({ runId, result: "divergence" })]);
  });

  it("--run, --since and --status choose the runs", async () => {
    const { store, runId } = await recordRun(tempDir());
    const agents = join(HERE, "prompt-v2.ts");
    const none = await runCli([
      "replay",
      "--agents",
      agents,
      "--db",
      store,
      "--since",
      "2999-01-01T00:00:00Z",
      "--json",
    ]);
    expect(JSON.parse(none.stdout)).toEqual({ runs: [], divergences: 0, errors: 0 });
    expect(none.code).toBe(0);
    const held = await runCli(["replay", "--agents", agents, "--db", store, "--status", "held", "--json"]);
    expect(JSON.parse(held.stdout).runs).toEqual([]);
    const one = await runCli([
      "replay",
      "--agents",
      agents,
      "--db",
      store,
      "--run",
      runId,
      "--status",
      "completed",
    ]);
    expect(one.code).toBe(2);
    expect(one.stderr).toContain("replay takes --run, or --since/--status to choose runs, not both");
    const byId = await runCli(["replay", "--agents", agents, "--db", store, "--run", runId]);
    expect(byId.code).toBe(1);
    expect(byId.stdout).toContain(`run ${runId} diverges at call 2`);
  });

  it("exits once the report is out, even when the agents' module leaves a timer running", async () => {
    const { store } = await recordRun(tempDir());
    const started = Date.now();
    const result = await runCli(
      ["replay", "--agents", join(HERE, "prompt-v1-open-timer.ts"), "--db", store],
      {
        process: true,
      },
    );
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("1 same");
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 30_000);

  it("an unknown run id or a missing journal exits 2 and names it", async () => {
    const { store } = await recordRun(tempDir());
    const agents = join(HERE, "prompt-v1.ts");
    const nope = await runCli(["replay", "--agents", agents, "--db", store, "--run", "nope"]);
    expect(nope.code).toBe(2);
    expect(nope.stderr).toContain("has no run nope");
    const missing = join(tempDir(), "absent.db");
    const none = await runCli(["replay", "--agents", agents, "--db", missing]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain(missing);
  });

  it("bad input exits 2 and says what was wrong", async () => {
    const { store } = await recordRun(tempDir());
    const noAgents = await runCli(["replay", "--db", store]);
    expect(noAgents.code).toBe(2);
    expect(noAgents.stderr).toContain("replay needs --agents <module>");
    const badSince = await runCli([
      "replay",
      "--agents",
      join(HERE, "prompt-v1.ts"),
      "--db",
      store,
      "--since",
      "tuesday",
    ]);
    expect(badSince.code).toBe(2);
    expect(badSince.stderr).toContain("--since tuesday is not a time");
    const noModule = await runCli(["replay", "--agents", join(HERE, "missing.ts"), "--db", store]);
    expect(noModule.code).toBe(2);
    expect(noModule.stderr).toContain("there is no module at");
    expect(readFileSync(store).length).toBeGreaterThan(0);
  });
});
