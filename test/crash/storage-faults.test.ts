import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requirePg, TEST_PG_URL } from "../support/pg.js";

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * Issue 35 item 6, a short fixed-seed slice of the fault harness (decision 0080): the multi-worker
 * torture on a private PostgreSQL server, each worker through its own TCP proxy, with the server
 * restarted or SIGKILLed, workers partitioned shorter or longer than their lease, commits cut
 * after or before they reach the server, a worker's wall clock stepped by about an hour
 * (libfaketime: the test fails, never skips, without it — `apt-get install libfaketime`), the
 * journal's tablespace filled for a few seconds, and the waves' SIGKILLs between.
 */
describe("the fault harness on PostgreSQL (fixed seed, short)", () => {
  it("three workers, SIGKILLed three times, with three PostgreSQL restarts, three partitions, commits cut around their COMMIT, three wall-clock steps and three full disks: no duplicate, nothing lost, audit clean, no worker died on its own or was taken over alive for a clock step, no run failed for the outage", async () => {
    // The harness's own reads go to the private server; the shared one only has to be there for
    // the URL the CLI asks for (it is not used with these faults).
    await requirePg();
    const run = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        join(ROOT, "torture", "main.ts"),
        "--store",
        TEST_PG_URL,
        "--workers",
        "3",
        "--runs",
        "8",
        "--kills",
        "3",
        "--pauses",
        "0",
        "--lease-ms",
        "3000",
        "--faults",
        "pg-restart,partition,commit-lost,clock,disk-full",
        "--seed",
        "35",
        "--json",
      ],
      // Under two minutes on a quiet 2-core machine; far more under load (every restart interrupts every run).
      { cwd: ROOT, encoding: "utf8", timeout: 400_000 },
    );
    const line = run.stdout.trim().split("\n").at(-1) ?? "";
    expect(line.startsWith("{"), `${run.stderr}\n${run.stdout}`).toBe(true);
    const summary = JSON.parse(line);
    const context = JSON.stringify({ ...summary, stderr: run.stderr.slice(-3000) });
    // Every worker alive or killed by the harness (one that exited by itself is an error), no run
    // failed because PostgreSQL was away, no run taken from a live worker near a clock step.
    expect(summary.errors, context).toEqual([]);
    expect(summary.duplicates, context).toBe(0);
    expect(summary.lost, context).toBe(0);
    expect(summary.logCheck, context).toBe("clean");
    expect(summary.audit, context).toBe("clean");
    expect(summary.unsettled, context).toEqual([]);
    expect(summary.runs).toBe(8);
    expect(summary.held + summary.completed, context).toBe(summary.runs + summary.childRuns);
    expect(summary.kills).toBe(3);
    // One restart and one partition per wave; a cut only when a worker's append reached a COMMIT in time.
    expect(summary.faults["pg-restart"], context).toBe(3);
    expect(summary.faults.partition, context).toBe(3);
    expect(summary.faults["commit-lost"], context).toBeGreaterThan(0);
    expect(summary.faultDetail.restarts.fast + summary.faultDetail.restarts.sigkill).toBe(3);
    // One clock step per wave, forward or back; one full disk per wave, each refusing an insert (53100).
    expect(summary.faults.clock, context).toBe(3);
    expect(summary.faultDetail.clockSteps.forward + summary.faultDetail.clockSteps.back).toBe(3);
    expect(summary.faults["disk-full"], context).toBe(3);
    expect(summary.faultDetail.diskFull.probeRefused, context).toBe(3);
    expect(summary.takeOvers.overBound, context).toEqual([]);
    expect(run.status, context).toBe(0);
  }, 420_000);
});
