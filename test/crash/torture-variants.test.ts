import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

/** Run the torture harness with `args` and return its JSON summary (and what it said, for failures). */
const torture = (args: ReadonlyArray<string>) => {
  const run = spawnSync(
    process.execPath,
    ["--import", "tsx", join(ROOT, "torture", "main.ts"), ...args, "--json"],
    {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 280_000,
    },
  );
  const line = run.stdout.trim().split("\n").at(-1) ?? "";
  expect(line.startsWith("{"), `${run.stderr}\n${run.stdout}`).toBe(true);
  const summary = JSON.parse(line);
  const said = `${JSON.stringify({ ...summary, effectsPerCall: undefined })}\n${run.stderr}`;
  return { summary, said, status: run.status };
};

const expectClean = ({ summary, said, status }: ReturnType<typeof torture>) => {
  expect(summary.errors, said).toEqual([]);
  expect(summary.duplicates, said).toBe(0);
  expect(summary.lost, said).toBe(0);
  expect(summary.logCheck, said).toBe("clean");
  expect(summary.audit, said).toBe("clean");
  expect(summary.unsettled, said).toEqual([]);
  expect(status, said).toBe(0);
};

describe("crash torture, the variants decided through the API (fixed seed, short)", () => {
  it("ai-stream: a model call killed between its request and its outcome is decided through the API and the run ends; no process dies but by SIGKILL", () => {
    const result = torture([
      "--agent",
      "ai-stream",
      "--trials",
      "3",
      "--seed",
      "9",
      "--point",
      "after-effect-before-outcome",
      "--call",
      "torture-model",
    ]);
    expect(result.summary.agent).toBe("ai-stream");
    expectClean(result);
    // Every trial's run ends completed after the decisions: none is left held.
    expect(result.summary.completed, result.said).toBe(3);
    expect(result.summary.decisions, result.said).toBeGreaterThanOrEqual(1);
  }, 300_000);

  it("mcp: a send killed after the server ran it is confirmed through the API with its result; no duplicate send", () => {
    const result = torture([
      "--agent",
      "mcp",
      "--trials",
      "2",
      "--seed",
      "8",
      "--point",
      "after-effect-before-outcome",
      "--call",
      "mcp__send",
    ]);
    expect(result.summary.agent).toBe("mcp");
    expectClean(result);
    expect(result.summary.completed, result.said).toBe(2);
    expect(result.summary.decisionsByKind["confirmed-completed"], result.said).toBe(2);
  }, 300_000);
});

describe("crash torture, the ordinary day's fault kinds (fixed seed, short)", () => {
  it("backoff: a run killed during its durable backoff retries within its policy, never before the due time, the attempt count never going back; no duplicate, nothing lost", () => {
    const result = torture([
      "--faults",
      "backoff",
      "--trials",
      "3",
      "--seed",
      "5",
      "--point",
      "during-backoff",
    ]);
    expect(result.summary.faultKinds).toEqual(["backoff"]);
    expectClean(result);
    expect(result.summary.backoff.problems, result.said).toEqual([]);
    // Every trial was killed in a backoff, and its run (and child) completed after the restart.
    expect(result.summary.killedAtCrashPoint["during-backoff"], result.said).toBe(3);
    expect(result.summary.backoff.trialsWithABackoffCut, result.said).toBe(3);
    expect(result.summary.completed, result.said).toBe(6);
    // Each 429 was followed by a retry its policy scheduled: after the first one's Retry-After,
    // after the backoff for a second one (which says nothing).
    expect(result.summary.backoff.retriesScheduled, result.said).toBe(result.summary.backoff.refusals);
    expect(result.summary.backoff.retriesByReason["retry-after"], result.said).toBe(3);
    expect(result.summary.backoff.acted, result.said).toBe(3);
  }, 300_000);
});

describe("crash torture, cancel, queue and pause (fixed seed, short)", () => {
  it("cancel, queue, pause with backoff on libSQL: cancels from a second process with a call in flight, three inputs queued behind each run, pauses across restarts; no duplicate, nothing lost, every check clean", () => {
    const result = torture(["--faults", "backoff,cancel,queue,pause", "--trials", "4", "--seed", "3"]);
    expect(result.summary.faultKinds).toEqual(["backoff", "cancel", "queue", "pause"]);
    expect(result.summary.errors, result.said).toEqual([]);
    expect(result.summary.duplicates, result.said).toBe(0);
    expect(result.summary.lost, result.said).toBe(0);
    expect(result.summary.logCheck, result.said).toBe("clean");
    expect(result.summary.audit, result.said).toBe("clean");
    expect(result.summary.unsettled, result.said).toEqual([]);
    // No file keeps the secret: not even the receipt of a shell call that recovery reconciled right
    // before it carried a cancel out without executing the run again.
    expect(result.summary.secretLeaks, result.said).toEqual([]);
    expect(result.summary.backoff.problems, result.said).toEqual([]);
    expect(result.summary.cancel.problems, result.said).toEqual([]);
    expect(result.summary.queue.problems, result.said).toEqual([]);
    expect(result.summary.pause.problems, result.said).toEqual([]);
    // The kinds were played: a cancel in each cancel trial (with a call in flight, or after the end
    // when the process ended first), every queued input admitted, every pause resumed. How many
    // cancels met a call in flight and how many pauses were asked depend on timing under load.
    expect(result.summary.cancel.cancelsRequested, result.said).toBe(2);
    expect(result.summary.queue.queued + result.summary.queue.admittedDirectly, result.said).toBe(12);
    expect(result.summary.pause.resumed, result.said).toBe(result.summary.pause.paused);
  }, 300_000);
});

describe("crash torture, the wait kinds (fixed seed, short)", () => {
  it("sleep and signal on libSQL: killed at the wake-up's crash points, while parked, and right after a signal's commit (its sender killed too); signals before the wait, twice with one id, none (a timeout), one after the end refused: no timer fired twice or early, none lost, each signal consumed once, every check clean", () => {
    const result = torture(["--faults", "sleep,signal", "--trials", "4", "--seed", "64"]);
    expect(result.summary.faultKinds).toEqual(["sleep", "signal"]);
    expectClean(result);
    expect(result.summary.secretLeaks, result.said).toEqual([]);
    expect(result.summary.sleep.problems, result.said).toEqual([]);
    expect(result.summary.signal.problems, result.said).toEqual([]);
    // Every run (and child) slept once, was woken once after its due time, and completed.
    expect(result.summary.completed, result.said).toBe(8);
    expect(result.summary.sleep.counts.sleeps, result.said).toBe(8);
    expect(result.summary.sleep.counts.woken, result.said).toBe(result.summary.sleep.counts.parked);
    expect(result.summary.sleep.counts.runsFinished, result.said).toBe(8);
    // The plans were played: the owner killed while parked, a sender killed after its commit, a
    // signal sent before the wait and taken without parking, one sent twice recorded once, a wait
    // that timed out, and a signal to each ended run refused.
    expect(result.summary.waitKills.whileParked, result.said).toBe(1);
    expect(result.summary.signal.counts.sendersKilled, result.said).toBe(1);
    expect(result.summary.signal.counts.takenWithoutParking, result.said).toBe(1);
    expect(result.summary.signal.counts.sentAgain, result.said).toBe(2);
    expect(result.summary.signal.counts.timedOut, result.said).toBe(1);
    expect(result.summary.signal.counts.consumed, result.said).toBe(3);
    expect(result.summary.signal.counts.sentLate, result.said).toBe(4);
    expect(result.summary.killedAtCrashPoint["before-wake"], result.said).toBeGreaterThanOrEqual(1);
    expect(result.summary.killedAtCrashPoint["after-woken"], result.said).toBe(1);
  }, 300_000);
});

describe("crash torture, the schedule kind (fixed seed, short)", () => {
  it("schedule on libSQL: three schedules (overlap skip and queue, a seconds cron) ticked by processes killed right before a tick's admission and right after it: no tick recorded or admitted twice, none lost while a process was up, the catch-up after each restart counted, overlap skip one run at a time, every check clean", () => {
    const result = torture(["--faults", "schedule", "--trials", "2", "--seed", "71"]);
    expect(result.summary.faultKinds).toEqual(["schedule"]);
    expectClean(result);
    expect(result.summary.schedule.problems, result.said).toEqual([]);
    const counts = result.summary.schedule.counts;
    expect(counts.schedules, result.said).toBe(6);
    expect(counts.runs, result.said).toBe(counts.runsFinished);
    expect(counts.admitted, result.said).toBeGreaterThanOrEqual(4);
    // A tick whose process died before or after its admission is caught up after the restart.
    expect(counts.missedTicks, result.said).toBeGreaterThanOrEqual(1);
    // Ticks owed while a process was up (counts.owed) depend on how fast processes start under
    // load: the PostgreSQL slice (three workers, test/crash/workers.test.ts) asserts them.
    expect(result.summary.killedAtCrashPoint["before-tick-admit"], result.said).toBe(1);
    expect(result.summary.killedAtCrashPoint["after-tick-admit"], result.said).toBe(1);
  }, 300_000);
});

describe("crash torture, the approval kind (fixed seed, short)", () => {
  it("approval on libSQL: a call awaiting approval, the owner killed while parked on it and at after-approval-wake; approved with edited arguments from a second runtime, denied from a holdfast deny killed at after-approval: no effect before its approval, the edit is what ran, once; the denied call never ran; every check clean", () => {
    const result = torture(["--faults", "approval", "--trials", "2", "--seed", "73"]);
    expect(result.summary.faultKinds).toEqual(["approval"]);
    expectClean(result);
    expect(result.summary.approval.problems, result.said).toEqual([]);
    const counts = result.summary.approval.counts;
    expect(counts, result.said).toMatchObject({
      awaited: 2,
      approved: 1,
      edited: 1,
      denied: 1,
      effects: 1,
      finished: 2,
    });
    expect(result.summary.waitKills.whileAwaitingApproval, result.said).toBe(1);
    expect(result.summary.waitKills.approverAtAfterApproval, result.said).toBe(1);
    expect(result.summary.killedAtCrashPoint["after-approval-wake"], result.said).toBe(1);
  }, 300_000);
});

describe("crash torture, the SSH and terminal tools (fixed seed, short)", () => {
  it("ssh against a real OpenSSH server: killed before the intent, after it (no start receipt: voided, run once after recovery) and after the command ran (its exit receipt read over a new connection); no command's witness line twice, every run completed", () => {
    const result = torture(["--agent", "ssh", "--trials", "3", "--seed", "34"]);
    expect(result.summary.agent).toBe("ssh");
    expectClean(result);
    expect(result.summary.trialsPerCrashPoint, result.said).toEqual({
      "before-intent": 1,
      "after-intent": 1,
      "after-effect-before-outcome": 1,
    });
    expect(result.summary.kills, result.said).toBeGreaterThanOrEqual(3);
    expect(result.summary.completed, result.said).toBe(3);
    // The two calls killed around their command are proved from the remote receipts, not decided.
    expect(result.summary.reconciled, result.said).toBeGreaterThanOrEqual(2);
  }, 300_000);

  it("ssh: the connection dropped mid-command (the server's session processes killed) is never sent again: held in doubt, decided from the witness, run on; every run completed", () => {
    const result = torture(["--agent", "ssh", "--trials", "2", "--seed", "35", "--point", "drop-session"]);
    expect(result.summary.agent).toBe("ssh");
    expectClean(result);
    expect(result.summary.sessionLost.trials, result.said).toBe(2);
    expect(result.summary.sessionLost.killedProcesses, result.said).toBeGreaterThanOrEqual(2);
    expect(result.summary.completed, result.said).toBe(2);
  }, 300_000);

  it("terminal: killed before the intent, after it and after the command ran: reconciled from the session's receipts; no command's witness line twice, every run completed", () => {
    const result = torture(["--agent", "terminal", "--trials", "3", "--seed", "36"]);
    expect(result.summary.agent).toBe("terminal");
    expectClean(result);
    expect(result.summary.kills, result.said).toBeGreaterThanOrEqual(3);
    expect(result.summary.completed, result.said).toBe(3);
    expect(result.summary.reconciled, result.said).toBeGreaterThanOrEqual(2);
  }, 300_000);

  it("terminal: the session's bash killed mid-command is never typed the command again: held in doubt, decided from the witness, the next command opens a new session; every run completed", () => {
    const result = torture([
      "--agent",
      "terminal",
      "--trials",
      "2",
      "--seed",
      "37",
      "--point",
      "kill-session",
    ]);
    expect(result.summary.agent).toBe("terminal");
    expectClean(result);
    expect(result.summary.sessionLost.trials, result.said).toBe(2);
    expect(result.summary.sessionLost.killedProcesses, result.said).toBeGreaterThanOrEqual(2);
    expect(result.summary.completed, result.said).toBe(2);
  }, 300_000);
});

describe("crash torture, the browser tool (real Chromium, fixed seed, short)", () => {
  it("browser: killed while the form's submit is in flight (the site counted it, its answer late): with the probe, recovery finds the attempt on the site and completes the call; without, the run is held and decided from the witness; the site kept one order per run", () => {
    const result = torture(["--agent", "browser", "--trials", "2", "--seed", "34", "--point", "mid-submit"]);
    expect(result.summary.agent).toBe("browser");
    expectClean(result);
    expect(result.summary.sessionLost, result.said).toEqual({ trials: 2, killedProcesses: 2 });
    expect(result.summary.browser, result.said).toMatchObject({
      trialsWithProbe: 1,
      trialsWithoutProbe: 1,
      submitsReceived: 2,
      submitsDone: 2,
      probe: { done: 1, notDone: 0, unknown: 0 },
      trialsWithOneOrder: 2,
      problems: [],
    });
    expect(result.summary.decisionsByKind["confirmed-completed"], result.said).toBe(1);
    expect(result.summary.completed, result.said).toBe(2);
  }, 300_000);

  it("browser: killed after the submit's intent, before it was sent: the probe reserves the attempt's key on the site (not done), the lost session fails the next attempt definitely, the agent goes through the form again and the site counts one order; Chromium killed mid-submit holds the call, decided from the witness", () => {
    const early = torture([
      "--agent",
      "browser",
      "--trials",
      "1",
      "--seed",
      "38",
      "--point",
      "after-intent",
      "--call",
      "browser",
    ]);
    expectClean(early);
    expect(early.summary.killedAtCrashPoint, early.said).toEqual({ "after-intent": 1 });
    expect(early.summary.browser, early.said).toMatchObject({
      trialsWithProbe: 1,
      submitsReceived: 1,
      submitsDone: 1,
      probe: { done: 0, notDone: 1, unknown: 0 },
      trialsWithOneOrder: 1,
    });
    expect(early.summary.completed, early.said).toBe(1);
    const browserKilled = torture([
      "--agent",
      "browser",
      "--trials",
      "1",
      "--seed",
      "40",
      "--point",
      "kill-browser",
    ]);
    expectClean(browserKilled);
    expect(browserKilled.summary.sessionLost, browserKilled.said).toEqual({ trials: 1, killedProcesses: 1 });
    expect(browserKilled.summary.decisionsByKind, browserKilled.said).toEqual({ "confirmed-completed": 1 });
    expect(browserKilled.summary.browser.trialsWithOneOrder, browserKilled.said).toBe(1);
    expect(browserKilled.summary.completed, browserKilled.said).toBe(1);
  }, 300_000);
});
