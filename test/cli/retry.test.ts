import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { witnessLines } from "../support/witness.js";
import { expectTwoLineError, parseJsonLines, ROOT, runCli } from "./cliProcess.js";

/**
 * A small application in its own process: agent `asker` makes a call that completes (`note`), then
 * a model-provider call (`provider`) that answers 503 — a definite failure — the first
 * HF_FAILURES times. Unhandled, the failure holds the run (decision-needed). `submit` starts the
 * run; `recover` opens the journal, which continues runs a person decided.
 */
const APP = `
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { Schema } from ${JSON.stringify(import.meta.resolve("effect"))};
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from ${JSON.stringify(pathToFileURL(join(ROOT, "src", "index.ts")).href)};

const witness = process.env.HF_WITNESS;
const tries = () => (existsSync(witness) ? readFileSync(witness, "utf8").split("\\n").filter(Boolean).length : 0);
const note = defineTool({
  name: "note",
  args: Schema.Struct({ text: Schema.String }),
  run: async ({ text }) => ({ noted: text }),
});
const provider = defineTool({
  name: "provider",
  args: Schema.Struct({ prompt: Schema.String }),
  run: async ({ prompt }) => {
    appendFileSync(witness, "attempt\\n");
    if (tries() <= Number(process.env.HF_FAILURES)) throw new DefiniteFailure("provider answered 503");
    return "answer to " + prompt;
  },
});
const asker = defineAgent({
  name: "asker",
  version: "1",
  run: async (turn) => {
    await turn.tool(note, { text: "asking" });
    return turn.tool(provider, { prompt: "hello" });
  },
});
const runtime = await openRuntime({ store: process.env.HF_DB, agents: [asker], tools: [note, provider], allowlist: {} });
const out = (value) => process.stdout.write(JSON.stringify(value) + "\\n");
const { done } = runtime.recovery;
if (done) out({ kind: "recovered", results: await done });
if (process.env.HF_ACTION === "submit") {
  const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: {} });
  out({ kind: "result", result: await run.result });
}
await runtime.close();
`;

let dir = "";
let db = "";
let witness = "";
let app = "";
let runId = "";
let heldVersion = 0;

const runApp = (action: "submit" | "recover"): Promise<Array<Record<string, unknown>>> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", app], {
      cwd: ROOT,
      env: { ...process.env, HF_DB: db, HF_WITNESS: witness, HF_FAILURES: "2", HF_ACTION: action },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(parseJsonLines(stdout)) : reject(new Error(`app exited ${code}:\n${stderr}`)),
    );
  });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "holdfast-cli-retry-"));
  db = join(dir, "journal.db");
  witness = join(dir, "attempts.txt");
  app = join(dir, "app.mjs");
  writeFileSync(app, APP);
  const lines = await runApp("submit");
  const result = lines.find((line) => line.kind === "result")?.result as {
    status: string;
    runId: string;
    reasons: Array<{ code: string; callId: string }>;
  };
  expect(result).toMatchObject({ status: "held", reasons: [{ code: "decision-needed" }] });
  runId = result.runId;
  expect(result.reasons[0]!.callId).toBe(`${runId}/1`);
  expect(witnessLines(witness)).toHaveLength(1);
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("holdfast retry (in order, one run held on a definite failure)", () => {
  it("show offers a retry of the failed call (and stop), not the in-doubt decisions", async () => {
    const result = await runCli(["show", runId, "--db", db, "--json"]);
    expect(result.code).toBe(0);
    const { commands, version } = JSON.parse(result.stdout) as {
      version: number;
      commands: Array<{ command: string }>;
    };
    heldVersion = version;
    expect(commands.map((c) => c.command)).toEqual([
      `holdfast retry ${runId} ${runId}/1 --attempts 1 --db ${db}`,
      `holdfast decide ${runId} stop --based-on ${version} --db ${db}`,
    ]);
  });

  it("a retry of a call that did not fail is refused: exit 1, nothing written", async () => {
    const result = await runCli(["retry", runId, `${runId}/0`, "--attempts", "1", "--db", db]);
    expect(result.code).toBe(1);
    const { reason, hint } = expectTwoLineError(result.stderr);
    expect(reason).toBe(`call ${runId}/0 of run ${runId} is completed; nothing was written`);
    expect(hint).toContain("only a definitely failed call can be retried");
  });

  it("a grant above the maximum is refused: exit 1", async () => {
    const result = await runCli(["retry", runId, `${runId}/1`, "--attempts", "4", "--db", db]);
    expect(result.code).toBe(1);
    expect(expectTwoLineError(result.stderr).reason).toContain("exceeds the maximum of 3");
  });

  it("a grant is recorded by the OS user; the next runtime with the agent uses it, one recorded attempt each", async () => {
    const granted = await runCli(["retry", runId, `${runId}/1`, "--attempts", "2", "--db", db, "--json"]);
    expect(granted.stderr).toBe("");
    expect(granted.code).toBe(0);
    expect(JSON.parse(granted.stdout)).toMatchObject({
      runId,
      callId: `${runId}/1`,
      attempts: 2,
      grantedBy: userInfo().username,
      // retry.granted and run.resumed on the version show printed: the refusals wrote nothing.
      version: heldVersion + 2,
      status: "running",
      live: false,
      next: expect.stringContaining(
        `no runtime with agent "asker@1" is live now: the run continues when one opens this journal`,
      ),
    });
    expect(witnessLines(witness)).toHaveLength(1);

    const lines = await runApp("recover");
    expect(lines.find((line) => line.kind === "recovered")?.results).toEqual([
      { status: "completed", runId, output: "answer to hello" },
    ]);
    // The first try and both granted attempts, nothing more.
    expect(witnessLines(witness)).toHaveLength(3);
    const events = parseJsonLines((await runCli(["events", "--db", db, "--json"])).stdout);
    const attempts = events
      .filter((e) => e.type === "call.intended" && (e.payload as { seq: number }).seq === 1)
      .map((e) => (e.payload as { attempt: number }).attempt);
    expect(attempts).toEqual([1, 2, 3]);
    expect(events.filter((e) => e.type === "retry.granted")).toHaveLength(1);
  });
});
