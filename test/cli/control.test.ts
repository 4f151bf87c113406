import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { runCli } from "./cliProcess.js";

const tempDir = useTempDir();

let started: () => void = () => undefined;
let release: () => void = () => undefined;
const waiting = defineTool({
  name: "waiting",
  args: Schema.Struct({ label: Schema.String }),
  run: async ({ label }, { signal }) =>
    new Promise((resolve, reject) => {
      release = () => resolve({ label });
      signal.addEventListener("abort", () => reject(new DefiniteFailure("aborted before sending")));
      started();
    }),
});
const after = defineTool({
  name: "after",
  args: Schema.Struct({ label: Schema.String }),
  run: async ({ label }) => ({ label, done: true }),
});
const agent = defineAgent({
  name: "two-steps",
  version: "1",
  run: async (turn, input: { label: string }) => {
    await turn.tool(waiting, { label: input.label });
    return turn.tool(after, { label: input.label });
  },
});

const openOwner = (db: string) => openRuntime({ store: db, agents: [agent], tools: [waiting, after] });
const startRun = async (runtime: Awaited<ReturnType<typeof openOwner>>, chatId: string) => {
  const going = new Promise<void>((resolve) => {
    started = resolve;
  });
  const run = await runtime.submit({ chatId, inputId: "m1", agent: "two-steps", content: { label: chatId } });
  await going;
  return run;
};

describe("holdfast cancel, pause, resume", () => {
  it("holdfast cancel from another process reaches the owner: the run ends cancelled; cancelling it again is a no-op with exit 0", async () => {
    const db = join(tempDir(), "journal.db");
    const owner = await openOwner(db);
    try {
      const run = await startRun(owner, "c1");
      const cancel = await runCli(
        ["cancel", run.runId, "--by", "ada", "--note", "runaway", "--db", db, "--json"],
        {
          process: true,
        },
      );
      expect(cancel.code, cancel.stderr).toBe(0);
      expect(JSON.parse(cancel.stdout)).toMatchObject({
        accepted: true,
        runId: run.runId,
        status: "cancel-requested",
      });
      expect(await run.result).toMatchObject({ status: "cancelled", by: "ada", note: "runaway" });

      const again = await runCli(["cancel", run.runId, "--by", "ada", "--db", db]);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain("already ended (cancelled)");
      const listed = await runCli(["runs", "--status", "cancelled", "--db", db, "--json"]);
      expect(listed.stdout).toContain(run.runId);
    } finally {
      await owner.close();
    }
  });

  it("holdfast pause parks the run; holdfast resume records the resume; pausing it twice is refused with exit 1", async () => {
    const db = join(tempDir(), "journal.db");
    let owner = await openOwner(db);
    const run = await startRun(owner, "c2");
    const pause = await runCli(["pause", run.runId, "--by", "ada", "--note", "budget", "--db", db]);
    expect(pause.code, pause.stderr).toBe(0);
    release();
    expect(await run.result).toEqual({ status: "paused", runId: run.runId });
    const twice = await runCli(["pause", run.runId, "--by", "ada", "--db", db, "--json"]);
    expect(twice.code).toBe(1);
    expect(JSON.parse(twice.stdout)).toMatchObject({ accepted: false, status: "paused" });
    await owner.close();

    const resume = await runCli(["resume", run.runId, "--by", "ada", "--db", db]);
    expect(resume.code, resume.stderr).toBe(0);
    expect(resume.stdout).toContain(`run ${run.runId} resumed by ada`);
    // The application opens the journal again: its recovery continues the run.
    owner = await openOwner(db);
    try {
      expect(owner.recovery.resumed).toEqual([run.runId]);
      expect(await owner.wait(run.runId)).toMatchObject({
        status: "completed",
        output: { label: "c2", done: true },
      });
    } finally {
      await owner.close();
    }
  });
});
