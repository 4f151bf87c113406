import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * Issue 35 item 6 on libSQL, a short fixed-seed slice of the fault harness (decision 0080): the
 * single-store torture of the classic agent, its trials taking turns between a journal on a 16 MiB
 * tmpfs filled by a ballast for a moment (at an intent in flight, right after one, at random; needs
 * root to mount) and the wall clock of every agent process of the trial stepped by an hour through
 * one libfaketime file (the test fails, never skips, without it — `apt-get install libfaketime`),
 * with the trials' SIGKILLs between.
 */
describe("the fault harness on libSQL (fixed seed, short)", () => {
  it("full disks and hour-long clock steps between SIGKILLs: each played, every full disk refusing a write, no duplicate, nothing lost, audit clean, no process ended on its own but for the full disk", () => {
    const run = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        join(ROOT, "torture", "main.ts"),
        "--faults",
        "disk-full,clock",
        "--trials",
        "6",
        "--seed",
        "35",
        "--json",
      ],
      // About a minute and a half on a quiet 2-core machine.
      { cwd: ROOT, encoding: "utf8", timeout: 400_000 },
    );
    const line = run.stdout.trim().split("\n").at(-1) ?? "";
    expect(line.startsWith("{"), `${run.stderr}\n${run.stdout}`).toBe(true);
    const { effectsPerCall: _e, ...summary } = JSON.parse(line);
    const context = JSON.stringify({ ...summary, stderr: run.stderr.slice(-3000) });
    // A process that exited by itself (not killed by the harness, not stopped by the full disk naming it) is an error.
    expect(summary.errors, context).toEqual([]);
    expect(summary.duplicates, context).toBe(0);
    expect(summary.lost, context).toBe(0);
    expect(summary.logCheck, context).toBe("clean");
    expect(summary.audit, context).toBe("clean");
    expect(summary.unsettled, context).toEqual([]);
    // The kinds take turns: three trials each, each fault played in its trial.
    expect(summary.faults, context).toEqual({ "disk-full": 3, clock: 3 });
    expect(summary.faultDetail.notPlayed, context).toBe(0);
    // Every fill left no room: a 4 KiB file on the journal's tmpfs was refused (ENOSPC).
    expect(summary.faultDetail.diskFull.probeRefused, context).toBe(3);
    expect(summary.faultDetail.clockSteps.forward + summary.faultDetail.clockSteps.back).toBe(3);
    expect(summary.kills, context).toBeGreaterThan(0);
    expect(run.status, context).toBe(0);
  }, 420_000);
});
