import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const tempDir = useTempDir();
const ROOT = join(import.meta.dirname, "..", "..");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a 'not started' proof while the old owner lives (law 10), end to end", () => {
  it("F2: an owner paused between its lease check and its start receipt wakes after another worker proved not-started and ran the command: it does not run it again", async () => {
    const dir = tempDir();
    const db = join(dir, "j.db");
    const work = join(dir, "work");
    mkdirSync(work);
    const witness = join(dir, "witness.txt");
    process.env.HF_WORK = work;
    process.env.HF_WITNESS = witness;
    try {
      const mod = await import("../support/race-module.js");
      const owner = await openRuntime({
        store: db,
        agents: mod.agents,
        tools: mod.tools,
        recovery: { leaseMs: 3_000 },
      });
      // A second worker, another process on the same journal, looking every half lease.
      const worker = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          join(ROOT, "src/adapters/surfaces/cli/main.ts"),
          "worker",
          "--store",
          db,
          "--module",
          join(ROOT, "test/support/race-module.ts"),
          "--lease-ms",
          "3000",
          "--json",
        ],
        {
          cwd: ROOT,
          env: { ...process.env, HF_PAUSE_MS: "", HOLDFAST_WORKER_ID: "" },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let out = "";
      worker.stdout.on("data", (d) => {
        out += d;
      });
      worker.stderr.on("data", (d) => {
        out += d;
      });
      try {
        while (!out.includes('"started"')) await sleep(50);
        // This process stops for 6 s right after its lease check: well past its 3 s lease.
        process.env.HF_PAUSE_MS = "6000";
        const run = await owner.submit({ chatId: "c", inputId: "i", agent: "once", content: null });
        const result = await run.result;
        delete process.env.HF_PAUSE_MS;
        // The other worker took the run over, proved attempt 1 never started (and voided it), ran attempt 2.
        expect(result.status, JSON.stringify(result)).toBe("elsewhere");
        const deadline = Date.now() + 30_000;
        while (!out.includes('"settled"') && Date.now() < deadline) await sleep(100);
        const lines = witnessLines(witness);
        expect(lines, out).toEqual([`charged ${run.runId}/0#2`]);
        const events = (await owner.events(run.runId)).map((e) => e.event);
        expect(events).toContainEqual(
          expect.objectContaining({ type: "call.reconciled", outcome: "not-completed", attempt: 1 }),
        );
        expect(events.at(-1)?.type).toBe("run.completed");
      } finally {
        worker.kill("SIGINT");
        await new Promise((r) => worker.once("exit", r));
        await owner.close();
      }
    } finally {
      delete process.env.HF_WORK;
      delete process.env.HF_WITNESS;
      delete process.env.HF_PAUSE_MS;
    }
  }, 60_000);
});
