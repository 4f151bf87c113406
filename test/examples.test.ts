import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { approvalExample } from "../examples/approval.js";
import { auditEvidence } from "../examples/audit.js";
import { quickstart } from "../examples/quickstart.js";
import { signalExample } from "../examples/signal.js";
import { sleepExample } from "../examples/sleep.js";
import { useTempDir } from "./support/tmp.js";

const tempDir = useTempDir();

describe("examples", () => {
  it("the README quickstart runs to completion", async () => {
    const result = await quickstart(join(tempDir(), "journal.db"));
    expect(result).toMatchObject({
      status: "completed",
      output: { sent: { queued: true, to: "ada@example.com", subject: "Your report" } },
    });
  });

  it("`npx tsx examples/quickstart.ts` in a fresh folder prints the completed result, and the same run again", () => {
    const dir = tempDir();
    const root = join(import.meta.dirname, "..");
    // What `npx tsx` starts: Node with tsx's loader, here from this checkout's node_modules.
    const loader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href;
    const runOnce = () => {
      const ran = spawnSync(process.execPath, ["--import", loader, join(root, "examples", "quickstart.ts")], {
        cwd: dir,
        encoding: "utf8",
        env: { ...process.env, HOLDFAST_STORE: "" },
        timeout: 60_000,
      });
      expect(ran.status, ran.stderr).toBe(0);
      return JSON.parse(ran.stdout) as { status: string; runId: string };
    };
    const first = runOnce();
    expect(first).toMatchObject({ status: "completed", output: { sent: { to: "ada@example.com" } } });
    expect(runOnce().runId).toBe(first.runId);
  }, 120_000);

  it("the README's waiting examples: a sleep parks and is woken; a signal wakes the run that waits for it, once", async () => {
    expect(await sleepExample(join(tempDir(), "journal.db"))).toMatchObject({
      parked: "waiting",
      done: { status: "completed", output: { remindedAfterMs: 500 } },
    });
    expect(await signalExample(join(tempDir(), "journal.db"))).toMatchObject({
      parked: "waiting",
      sent: true,
      recordedAgain: false,
      done: { status: "completed", output: { order: "7", refunded: true, approval: "ticket-7" } },
    });
  });

  it("the README's approvals example: an approved payment runs once with the edited amount; a denied one never runs", async () => {
    expect(await approvalExample(join(tempDir(), "journal.db"))).toMatchObject({
      parked: "waiting",
      approved: { status: "completed", output: { invoice: "INV-1", amount: 450, paid: true } },
      denied: { status: "completed", output: { paid: false, why: "not a supplier we know", by: "bob" } },
      paid: ["INV-1: 450"],
    });
  });

  it("`npx tsx examples/signal.ts` and `examples/sleep.ts` print their completed results", () => {
    const root = join(import.meta.dirname, "..");
    const loader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href;
    for (const [file, output] of [
      ["signal.ts", { refunded: true }],
      ["sleep.ts", { remindedAfterMs: 500 }],
      ["approval.ts", { amount: 450, paid: true }],
    ] as const) {
      const ran = spawnSync(process.execPath, ["--import", loader, join(root, "examples", file)], {
        cwd: tempDir(),
        encoding: "utf8",
        env: { ...process.env, HOLDFAST_STORE: "" },
        timeout: 60_000,
      });
      expect(ran.status, ran.stderr).toBe(0);
      const printed = JSON.parse(ran.stdout);
      expect(printed.done ?? printed.approved).toMatchObject({ status: "completed", output });
    }
  }, 120_000);

  it("the audit example finds the quickstart's journal clean at its anchored head, and a wrong anchor", async () => {
    const store = join(tempDir(), "journal.db");
    await quickstart(store);
    const first = await auditEvidence(store, "");
    expect(first).toMatchObject({ clean: true, expectedHead: null });
    const anchored = `${first.headDigest}@${first.lastPosition}`;
    expect(await auditEvidence(store, anchored)).toMatchObject({
      clean: true,
      expectedHead: { matches: true },
    });
    const wrong = await auditEvidence(store, "0".repeat(64));
    expect(wrong.clean).toBe(false);
    expect(wrong.findings.map((f) => f.kind)).toContain("head-mismatch");
  });
});
