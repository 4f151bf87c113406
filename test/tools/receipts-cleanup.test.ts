import { mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeShellTool } from "../../src/adapters/integrations/tools/index.js";
import { openRuntime } from "../../src/index.js";
import { byteScan, filesUnder } from "../../torture/byteScan.js";
import { freshKey, keyEnv } from "../support/keys.js";
import { lineOf, runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { callContext } from "./calls.js";

const tempDir = useTempDir();
const WORKER = join(import.meta.dirname, "..", "support", "receipts-worker.ts");
const SECRET = "tok-Receipt-9f2c41d7";

const setUp = () => {
  const dir = tempDir();
  const work = join(dir, "work");
  mkdirSync(work);
  return {
    dir,
    work,
    receipts: `${work}.receipts`,
    env: { HF_DB: join(dir, "journal.db"), HF_WORK: work, HF_SECRET: SECRET },
  };
};

const entries = (folder: string): string[] => {
  try {
    return readdirSync(folder).sort();
  } catch {
    return [];
  }
};

const mode = (path: string): string => (statSync(path).mode & 0o777).toString(8);

describe("shell receipts: owner-only, and gone once the outcome is recorded", () => {
  it("F5: a finished call's receipt folder, with the command's unmasked output, is removed; no secret is left in the journal, the receipts or the work folder", async () => {
    const { dir, receipts, env } = setUp();
    const run = await runScript(WORKER, { ...env, HF_ACTION: "submit" });
    expect(run.code, run.stderr).toBe(0);
    expect(lineOf(run, "result")?.result).toMatchObject({
      status: "completed",
      output: { printed: "out:«secret:TOKEN»", failed: 3, refused: "CallFailed" },
    });
    expect(entries(receipts)).toEqual([]);
    expect(byteScan([dir], { TOKEN: SECRET })).toEqual([]);
  });

  it("F5: after a SIGKILL right after a shell call's outcome, its receipts are still there; the next execution, reusing the outcome, removes them", async () => {
    const { dir, receipts, env } = setUp();
    const crashed = await runScript(WORKER, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "shell",
    });
    expect(crashed.signal).toBe("SIGKILL");
    // The crash window is real: the command's output, secret and all, is on disk.
    const [left] = entries(receipts);
    expect(left).toBeDefined();
    expect(readFileSync(join(receipts, left!, "stdout"), "utf8")).toBe(`out:${SECRET}`);
    expect(byteScan([receipts], { TOKEN: SECRET })).not.toEqual([]);

    const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(lineOf(recovered, "recovered")?.results).toEqual([
      expect.objectContaining({ status: "completed" }),
    ]);
    expect(entries(receipts)).toEqual([]);
    expect(byteScan([dir], { TOKEN: SECRET })).toEqual([]);
  });

  it("a cancel that recovery carries out right after reconciling a shell call (no re-execution) still removes that attempt's receipts", async () => {
    const { dir, receipts, env } = setUp();
    const crashed = await runScript(WORKER, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-effect-before-outcome",
      HOLDFAST_CRASH_CALL: "shell",
    });
    expect(crashed.signal).toBe("SIGKILL");
    expect(byteScan([receipts], { TOKEN: SECRET })).not.toEqual([]);
    // Someone cancels the ownerless run from a process that has the tool (its reconciler) but not
    // the agent: it carries the cancel out itself, as recovery would, without executing the run.
    const operator = await openRuntime({
      store: env.HF_DB,
      agents: [],
      tools: [makeShellTool(env.HF_WORK, { env: { set: { TOKEN: SECRET } } })],
      secrets: { TOKEN: SECRET },
      recovery: { onOpen: false },
    });
    let runId: string;
    try {
      runId = (await operator.runs())[0]!.runId;
      expect(await operator.cancel(runId, { by: "ops", note: "not needed" })).toMatchObject({
        accepted: true,
      });
    } finally {
      await operator.close();
    }
    // The receipts proved the command completed; the run ended cancelled, never executed again.
    const after = await openRuntime({ store: env.HF_DB, agents: [], tools: [], recovery: { onOpen: false } });
    try {
      const row = await after.run(runId!);
      expect(row?.status, JSON.stringify(row?.heldReasons)).toBe("cancelled");
      const types = (await after.events(runId!)).map((e) => e.event.type);
      expect(types).toContain("call.reconciled");
      expect(types.filter((t) => t === "run.resumed")).toEqual([]);
    } finally {
      await after.close();
    }
    expect(byteScan([dir], { TOKEN: SECRET })).toEqual([]);
  });

  it("F5: an attempt recovery voided keeps its start receipt alone (the tombstone a late owner meets); the attempt that replaced it leaves nothing", async () => {
    const { dir, receipts, env } = setUp();
    const crashed = await runScript(WORKER, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "shell",
    });
    expect(crashed.signal).toBe("SIGKILL");
    const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(lineOf(recovered, "recovered")?.results).toEqual([
      expect.objectContaining({ status: "completed" }),
    ]);
    const folders = entries(receipts);
    expect(folders).toHaveLength(1);
    expect(folders[0]).toMatch(/_0_1$/);
    expect(entries(join(receipts, folders[0]!))).toEqual(["start"]);
    expect(JSON.parse(readFileSync(join(receipts, folders[0]!, "start"), "utf8"))).toMatchObject({
      state: "voided",
    });
    expect(byteScan([dir], { TOKEN: SECRET })).toEqual([]);
  });

  it("F5: a call in doubt keeps its receipts for recovery, in a 0700 folder with 0600 files, whatever the process umask", async () => {
    const { receipts, env } = setUp();
    const held = await runScript(WORKER, { ...env, HF_ACTION: "submit", HF_SLOW: "1", HF_TIMEOUT_MS: "500" });
    expect(held.code, held.stderr).toBe(0);
    expect(lineOf(held, "result")?.result).toMatchObject({ status: "held" });
    const [folder] = entries(receipts);
    expect(folder).toBeDefined();
    const path = join(receipts, folder!);
    expect(mode(path)).toBe("700");
    expect(entries(path)).toEqual(expect.arrayContaining(["start", "stdout", "stderr"]));
    for (const name of entries(path)) expect([name, mode(join(path, name))]).toEqual([name, "600"]);
    expect(readFileSync(join(path, "stdout"), "utf8")).toBe(`out:${SECRET}`);
  });

  it("F5: the wrapper writes its output and exit files 0600 under a permissive umask, and the command keeps that umask", async () => {
    const work = join(tempDir(), "work");
    mkdirSync(work);
    const shell = makeShellTool(work);
    const previous = process.umask(0o022);
    try {
      const result = await shell.run({ command: "umask; : > made-by-command" }, callContext("r/0#1"));
      expect(result.stdout.trim()).toBe("0022");
    } finally {
      process.umask(previous);
    }
    const folder = join(`${work}.receipts`, "r_0_1");
    expect(entries(folder)).toEqual(["exit", "start", "stderr", "stdout"]);
    for (const name of entries(folder)) expect([name, mode(join(folder, name))]).toEqual([name, "600"]);
    expect(mode(join(work, "made-by-command"))).toBe("644");
  });

  it("law 8: with encryption on, after a SIGKILL and the recovery, no byte of the journal, its WAL and SHM, the receipts or the work folder holds the secret, the key or a tool's error text", async () => {
    const { dir, env } = setUp();
    const key = freshKey();
    const needles = { TOKEN: SECRET, key, "tool error text": "escape-Marker-5e1d" };
    const crashed = await runScript(WORKER, {
      ...env,
      ...keyEnv(key),
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "shell",
      HOLDFAST_CRASH_SKIP: "2",
    });
    expect(crashed.signal).toBe("SIGKILL");
    // Killed after the refused write, at the last shell call's intent: the WAL holds the error.
    const journalFiles = filesUnder([dir]).filter((file) => file.includes("journal.db"));
    expect(journalFiles.some((file) => file.endsWith("-wal"))).toBe(true);
    expect(byteScan(journalFiles, needles)).toEqual([]);

    const recovered = await runScript(WORKER, { ...env, ...keyEnv(key), HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(lineOf(recovered, "recovered")?.results).toEqual([
      expect.objectContaining({
        status: "completed",
        output: expect.objectContaining({ refused: "CallFailed" }),
      }),
    ]);
    expect(byteScan([dir], needles)).toEqual([]);
  });
});
