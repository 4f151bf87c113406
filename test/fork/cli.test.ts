import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openRuntime } from "../../src/index.js";
import { ROOT, runCli } from "../cli/cliProcess.js";
import { agents, tools } from "../support/fork-module.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const MODULE = join(ROOT, "test", "support", "fork-module.ts");
afterEach(() => {
  delete process.env.HF_WITNESS;
});

const lines = (path: string): string[] => readFileSync(path, "utf8").split("\n").filter(Boolean);

describe("holdfast fork", () => {
  it("forks a run at --at with an --outcome edit and runs it with the module's agents; a seq past the run's calls is refused, nothing written", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    process.env.HF_WITNESS = witness;
    const runtime = await openRuntime({ store: db, agents, tools, tracing: false });
    let runId: string;
    try {
      const original = await runtime.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      await original.result;
      runId = original.runId;
    } finally {
      await runtime.close();
    }
    const common = ["--module", MODULE, "--db", db, "--by", "ada", "--note", "what if step 2 said 5"];
    const forked = await runCli([
      "fork",
      runId,
      "--at",
      "2",
      "--outcome",
      '1={"n":2,"value":5}',
      ...common,
      "--json",
    ]);
    expect(forked.stderr).toBe("");
    expect(forked.code).toBe(0);
    const reply = JSON.parse(forked.stdout);
    expect(reply).toMatchObject({ forkedFrom: runId, reused: false, result: { status: "completed" } });
    expect(reply.result.output.results[1]).toEqual({ n: 2, value: 5 });
    // Steps 1 and 2 were not run again: 3, 4, 5 were, once each.
    expect(lines(witness)).toEqual(["1", "2", "3", "4", "5", "3", "4", "5"]);

    const past = await runCli(["fork", runId, "--at", "9", ...common]);
    expect(past.code).toBe(1);
    expect(past.stderr).toMatch(/made 5 call\(s\)[\s\S]*atCall 9 is past them/);
  });
});
