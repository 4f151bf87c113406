import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CRASH_POINTS } from "../../src/runtime/crash.js";

const ROOT = join(import.meta.dirname, "..", "..");
/** The crash points the torture cycles through: its agents declare no retry policy, so no backoff to kill. */
const POINTS = CRASH_POINTS.filter((point) => point !== "during-backoff");

describe("crash torture, AI SDK agent (fixed seed, short)", () => {
  it("SIGKILL at every crash point an AI SDK loop reaches: no duplicate effect or model request, no lost outcome, a clean log", () => {
    const run = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        join(ROOT, "torture", "main.ts"),
        "--agent",
        "ai",
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
    // What the harness said, for a failure on a loaded machine to be read afterwards.
    const said = `${JSON.stringify({ ...summary, effectsPerCall: undefined })}\n${run.stderr}`;
    expect(summary.agent).toBe("ai");
    expect(summary.errors, said).toEqual([]);
    expect(summary.duplicates, said).toBe(0);
    expect(summary.lost, said).toBe(0);
    expect(summary.logCheck, said).toBe("clean");
    expect(summary.audit, said).toBe("clean");
    expect(summary.unsettled, said).toEqual([]);
    // The agent saves no checkpoint, and a group commit is not always reached by one run alone. A
    // random kill is a timer: the AI agent's short run may finish before it fires (on a quiet
    // machine with this seed it does), so only the named crash points must have been reached.
    const reached = POINTS.filter((p) => p !== "mid-checkpoint" && p !== "mid-group-commit");
    for (const point of reached)
      expect(summary.killedAtCrashPoint[point] ?? 0, `${point}: ${said}`).toBeGreaterThanOrEqual(1);
    // Model requests are witnessed effects too: the summary counts them per idempotency key.
    expect(Object.keys(summary.effectsPerCall).length).toBeGreaterThan(0);
    expect(run.status, said).toBe(0);
  }, 300_000);
});
