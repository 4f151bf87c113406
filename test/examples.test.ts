import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { approvalExample } from "../examples/approval.js";
import { auditEvidence } from "../examples/audit.js";
import { quickstart } from "../examples/quickstart.js";
import { scheduleExample } from "../examples/schedule.js";
import { signalExample } from "../examples/signal.js";
import { sleepExample } from "../examples/sleep.js";
import { versionsExample } from "../examples/versions.js";
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

  it("the README's schedule example: a cron schedule in a time zone waits for its tick; a 1-second one makes a run per tick", async () => {
    const result = await scheduleExample(join(tempDir(), "journal.db"));
    expect(result.schedules).toEqual([
      { id: "heartbeat", status: "paused", nextDueAt: null },
      { id: "morning-digest", status: "active", nextDueAt: expect.stringMatching(/T0[67]:00:00\.000Z$/) },
    ]);
    expect(result.lastTick).toMatchObject({
      outcome: "admitted",
      inputId: expect.stringMatching(/^heartbeat@/),
    });
    expect(result.done).toMatchObject({
      status: "completed",
      output: { topic: "pulse", items: ["a", "b"], tick: result.lastTick!.inputId },
    });
  });

  it("the README's agent versions example: a run admitted by v1 re-executes on v1 beside v2; new inputs take v2 unless they name v1", async () => {
    expect(await versionsExample(join(tempDir(), "journal.db"))).toEqual({
      parked: "waiting",
      old: {
        agent: "greeter@1",
        done: expect.objectContaining({
          status: "completed",
          output: { hello: "Hello, Ada", bye: "Bye", by: "v1" },
        }),
      },
      fresh: {
        agent: "greeter@2",
        done: expect.objectContaining({ status: "completed", output: { hello: "Hi Bob!", by: "v2" } }),
      },
      pinned: {
        agent: "greeter@1",
        done: expect.objectContaining({
          status: "completed",
          output: { hello: "Hello, Cy", bye: "Bye", by: "v1" },
        }),
      },
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

  it("`npx tsx examples/signal.ts`, `sleep.ts`, `versions.ts` and `approval.ts` print their completed results", () => {
    const root = join(import.meta.dirname, "..");
    const loader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href;
    for (const [file, output] of [
      ["signal.ts", { done: { status: "completed", output: { refunded: true } } }],
      ["sleep.ts", { done: { status: "completed", output: { remindedAfterMs: 500 } } }],
      ["versions.ts", { old: { done: { output: { by: "v1" } } }, fresh: { done: { output: { by: "v2" } } } }],
      ["approval.ts", { approved: { status: "completed", output: { amount: 450, paid: true } } }],
    ] as const) {
      const ran = spawnSync(process.execPath, ["--import", loader, join(root, "examples", file)], {
        cwd: tempDir(),
        encoding: "utf8",
        env: { ...process.env, HOLDFAST_STORE: "" },
        timeout: 60_000,
      });
      expect(ran.status, ran.stderr).toBe(0);
      expect(JSON.parse(ran.stdout)).toMatchObject(output);
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
