import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/libsql/LibsqlJournal.js";
import { runWorker } from "../support/processes.js";
import { witnessLines } from "../support/witness.js";
import { expectTwoLineError, ROOT, runCli, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();
const MAIN = join(ROOT, "src", "adapters", "cli", "main.ts");
const MODULE = join(ROOT, "test", "support", "worker-module.ts");

/** `holdfast worker` as a long-running child process; its JSON lines as they come. */
const startWorkerCli = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", MAIN, "worker", ...args], {
    cwd: ROOT,
    env: { ...process.env, HOLDFAST_STORE: "", HOLDFAST_WORKER_ID: "", HOLDFAST_CRASH_AT: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Array<Record<string, unknown>> = [];
  let stderr = "";
  let buffer = "";
  child.stdout?.on("data", (chunk) => {
    buffer += chunk;
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      lines.push(JSON.parse(buffer.slice(0, nl)) as Record<string, unknown>);
      buffer = buffer.slice(nl + 1);
    }
  });
  child.stderr?.on("data", (chunk) => {
    stderr += chunk;
  });
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal })),
  );
  const waitFor = async (kind: string) => {
    const deadline = Date.now() + 30_000;
    while (!lines.some((l) => l.kind === kind)) {
      if (Date.now() > deadline) throw new Error(`no "${kind}" line: ${JSON.stringify(lines)} ${stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return lines.find((l) => l.kind === kind)!;
  };
  return { child, lines, exit, waitFor, stderr: () => stderr };
};

describe("holdfast worker", () => {
  it("without --module it is a usage error that names the flag", async () => {
    const result = await runCli(["worker", "--store", join(tempDir(), "journal.db")]);
    expect(result.code).toBe(2);
    expect(expectTwoLineError(result.stderr).reason).toContain("--module");
  });

  it("takes over the run of a dead process at once, says so in one line per step, and on SIGTERM stops with its claims released", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    // A process dies right after the intent of its reconciled call: the effect never happened.
    const crashed = await runWorker({
      HF_DB: db,
      HF_WITNESS: witness,
      HF_ACTION: "submit",
      HF_AGENT: "table",
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "reconciled",
    });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");

    const worker = startWorkerCli(
      ["--store", db, "--module", MODULE, "--worker-id", "w-test", "--lease-ms", "3000", "--json"],
      { HF_WITNESS: witness },
    );
    try {
      expect(await worker.waitFor("started")).toMatchObject({
        workerId: "w-test",
        leaseMs: 3000,
        everyMs: 1500,
      });
      const tookOver = await worker.waitFor("took-over");
      expect(tookOver.from).toEqual(expect.stringMatching(/:\d+:/));
      expect(await worker.waitFor("resumed")).toMatchObject({ runId: tookOver.runId });
      // The reconciler proved the call never ran: it ran once, here.
      expect(await worker.waitFor("settled")).toMatchObject({ runId: tookOver.runId, status: "completed" });
      expect(witnessLines(witness).filter((l) => l.startsWith("sent p-sent"))).toHaveLength(1);
    } finally {
      worker.child.kill("SIGTERM");
    }
    expect(await worker.exit, worker.stderr()).toEqual({ code: 0, signal: null });
    expect(worker.lines.at(-1)).toMatchObject({ kind: "stopped", workerId: "w-test" });
    const journal = LibsqlJournal.open(db);
    try {
      const events = (
        await journal.readStream(`run-${String(worker.lines.find((l) => l.kind === "took-over")!.runId)}`)
      ).map((e) => e.event.type);
      expect(events).toContain("run.claimed");
      expect(events.at(-1)).toBe("run.completed");
      expect(
        await journal.currentClaim(String(worker.lines.find((l) => l.kind === "took-over")!.runId)),
      ).toBeNull();
    } finally {
      await journal.close();
    }
  }, 60_000);
});
