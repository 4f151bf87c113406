import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CRASH_POINTS } from "../../src/runtime/crash.js";

const ROOT = join(import.meta.dirname, "..", "..");
/** The crash points the torture cycles through: its agents declare no retry policy, so no backoff to kill. */
const POINTS = CRASH_POINTS.filter((point) => point !== "during-backoff");

describe("crash torture (fixed seed, short)", () => {
  it("SIGKILL at every named crash point and at a random moment: no duplicate effect, no lost outcome, a clean log, no secret left on disk", () => {
    const run = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        join(ROOT, "torture", "main.ts"),
        "--trials",
        String(POINTS.length + 1),
        "--seed",
        "7",
        "--json",
      ],
      { cwd: ROOT, encoding: "utf8", timeout: 280_000 },
    );
    const line = run.stdout.trim().split("\n").at(-1) ?? "";
    expect(line.startsWith("{"), `${run.stderr}\n${run.stdout}`).toBe(true);
    const summary = JSON.parse(line);
    expect(summary.errors).toEqual([]);
    expect(summary.duplicates).toBe(0);
    expect(summary.lost).toBe(0);
    expect(summary.logCheck).toBe("clean");
    expect(summary.audit).toBe("clean");
    expect(summary.unsettled).toEqual([]);
    // The byte scan: the shell's secret is nowhere but in the receipts of attempts still in doubt.
    expect(summary.secretLeaks).toEqual([]);
    for (const point of [...POINTS, "random"])
      expect(summary.killedAtCrashPoint[point], point).toBeGreaterThanOrEqual(1);
    expect(run.status).toBe(0);
  }, 300_000);
});
