import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { steppedClocks } from "../../torture/steppedClock.js";
import { runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const tempDir = useTempDir();
const ROOT = join(import.meta.dirname, "..", "..");
const MAIN = join(ROOT, "src", "adapters", "surfaces", "cli", "main.ts");
const MODULE = join(ROOT, "test", "support", "worker-module.ts");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/*
 * Decision 0071, in a real `holdfast worker` process whose wall clock libfaketime steps (the fault
 * harness's clock kind; the test fails, never skips, without libfaketime): the wait between two
 * recovery passes is a duration. Measured on the wall clock, a pass that started while the clock
 * was an hour ahead waited, once the clock was set right, for that hour — no run of a dead worker
 * was taken over meanwhile.
 */
describe("holdfast worker and a stepped wall clock", () => {
  it("a worker whose wall clock was an hour ahead for a few seconds, then set right, still takes over a dead worker's run within a lease", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const clocks = steppedClocks(join(dir, "clock"), 1);
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        MAIN,
        "worker",
        "--db",
        db,
        "--module",
        MODULE,
        "--worker-id",
        "w-clock",
        "--lease-ms",
        "3000",
        "--json",
      ],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          ...clocks.env(0),
          HOLDFAST_STORE: "",
          HOLDFAST_WORKER_ID: "",
          HOLDFAST_CRASH_AT: "",
          HF_WITNESS: witness,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    const lines: Array<Record<string, unknown> & { at: number }> = [];
    let buffer = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      buffer += chunk;
      for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.startsWith("{"))
          lines.push({ ...(JSON.parse(line) as Record<string, unknown>), at: performance.now() });
      }
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const exit = new Promise((resolve) => child.on("close", resolve));
    const waitFor = async (kind: string, withinMs: number) => {
      const until = performance.now() + withinMs;
      while (!lines.some((l) => l.kind === kind)) {
        if (performance.now() > until)
          throw new Error(`no "${kind}" line within ${withinMs} ms: ${JSON.stringify(lines)} ${stderr}`);
        await sleep(20);
      }
      return lines.find((l) => l.kind === kind)!;
    };
    try {
      await waitFor("started", 30_000);
      // An hour ahead for 2.5 s (passes every 1.5 s: one starts on the stepped clock), then right.
      clocks.step(0, 3_600);
      await sleep(2_500);
      clocks.step(0, 0);
      await sleep(500);
      // Now a process of this host dies right after an intent whose reconciler proves it never ran.
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
      const diedAt = performance.now();
      // A dead process of this host is taken over at the next pass: within a pass and a lease, not an hour.
      const tookOver = await waitFor("took-over", 15_000);
      expect(tookOver.at - diedAt).toBeLessThan(3_000 + 1_500 + 2_000);
      await waitFor("settled", 15_000);
      expect(witnessLines(witness).filter((l) => l.startsWith("sent p-sent"))).toHaveLength(1);
    } finally {
      child.kill("SIGTERM");
      await exit;
    }
  }, 90_000);
});
