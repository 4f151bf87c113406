import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lineOf, runWorker } from "../support/processes.js";
import { countOf } from "../support/witness.js";
import { expectTwoLineError, parseJsonLines, runCli } from "./cliProcess.js";

/**
 * One held run for the whole file, made as in test/decisions: a worker is SIGKILLed right after the
 * non-allowlisted `record` tool took effect and before its outcome was committed; the next process
 * to open the journal holds the run (the call is in doubt). The tests then run in order on it.
 */
let dir = "";
let db = "";
let witness = "";
let runId = "";
let version = 0;

const workerEnv = () => ({ HF_DB: db, HF_WITNESS: witness, HF_CHAT: "c", HF_INPUT: "i", HF_PREFIX: "p" });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "holdfast-cli-decide-"));
  db = join(dir, "journal.db");
  witness = join(dir, "witness.txt");
  const crashed = await runWorker({
    ...workerEnv(),
    HF_ACTION: "submit",
    HOLDFAST_CRASH_AT: "after-effect-before-outcome",
    HOLDFAST_CRASH_CALL: "record",
  });
  expect(crashed.signal).toBe("SIGKILL");
  const recovered = await runWorker({ ...workerEnv(), HF_ACTION: "recover" });
  const report = lineOf(recovered, "recovery")?.report as { held: Array<{ runId: string }> };
  expect(report.held).toHaveLength(1);
  runId = report.held[0]!.runId;
  expect(countOf(witness, "p-a")).toBe(1);
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface ShownJson {
  run: { status: string };
  version: number;
  events: unknown[];
  commands: Array<{ action: string; decision?: string; callId?: string; command: string; meaning: string }>;
}

describe("holdfast show and decide on a held run (in order, one held run)", () => {
  it("show --json gives the stream version and, for the call in doubt, the five decide commands made on it", async () => {
    const result = await runCli(["show", runId, "--db", db, "--json"]);
    expect(result.code).toBe(0);
    const shown = JSON.parse(result.stdout) as ShownJson;
    expect(shown.run.status).toBe("held");
    expect(shown.version).toBe(shown.events.length);
    version = shown.version;
    const call = `${runId}/0`;
    const at = `holdfast decide ${runId} --based-on ${version} --call ${call}`;
    expect(shown.commands.map((c) => c.command)).toEqual([
      `${at} resume --db ${db}`,
      `${at} stop --db ${db}`,
      `${at} new-attempt --db ${db}`,
      `${at} confirmed-completed --note "…" --db ${db}`,
      `${at} confirmed-not-completed --note "…" --db ${db}`,
    ]);
    expect(shown.commands.every((c) => c.callId === call)).toBe(true);
  });

  it("show prints the held reason, the version and the exact decide command lines, per call in doubt", async () => {
    const result = await runCli(["show", runId, "--db", db]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`version    ${version}`);
    expect(result.stdout).toContain(`${runId}/0 in-doubt`);
    expect(result.stdout).toContain(`what you can do (made on version ${version};`);
    expect(result.stdout).toContain(`  call ${runId}/0 (tool "record", attempt 1, outcome not committed):`);
    // The tool's hint, recorded in the intent by the process that died: where to look.
    expect(result.stdout).toContain(`      how to check: the witness file has a line "p-a"`);
    expect(result.stdout).toContain(
      `  holdfast decide ${runId} --based-on ${version} --call ${runId}/0 confirmed-completed --note "…" --db ${db}`,
    );
  });

  it("started by npx, show prints the commands as `npx holdfast …`, pasteable from a checkout", async () => {
    const result = await runCli(["show", runId, "--db", db], { env: { npm_command: "exec" } });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      `  npx holdfast decide ${runId} --based-on ${version} --call ${runId}/0 confirmed-completed --note "…" --db ${db}`,
    );
  });

  it("an unknown decision is a usage error: exit 2, naming the five decisions", async () => {
    const result = await runCli(["decide", runId, "maybe", "--based-on", String(version), "--db", db]);
    expect(result.code).toBe(2);
    const { reason } = expectTwoLineError(result.stderr);
    expect(reason).toBe(
      `"maybe" is not a decision; use one of resume, stop, new-attempt, confirmed-completed, confirmed-not-completed`,
    );
  });

  it("a decision on a stale --based-on exits 1 naming the current version", async () => {
    const result = await runCli([
      "decide",
      runId,
      "--call",
      `${runId}/0`,
      "stop",
      "--based-on",
      String(version - 1),
      "--db",
      db,
    ]);
    expect(result.code).toBe(1);
    const { reason, hint } = expectTwoLineError(result.stderr);
    expect(reason).toBe(
      `run ${runId} is at version ${version}, the decision was made on version ${version - 1}; nothing was written`,
    );
    expect(hint).toContain(`--based-on ${version}`);
  });

  it("a confirmation without --note exits 1 and asks how you know", async () => {
    const result = await runCli([
      "decide",
      runId,
      "confirmed-completed",
      "--based-on",
      String(version),
      "--db",
      db,
    ]);
    expect(result.code).toBe(1);
    expect(expectTwoLineError(result.stderr).reason).toContain("needs a note saying how you know");
  });

  it("a call that is not in doubt is refused with the calls that are: exit 1, nothing written", async () => {
    const result = await runCli([
      "decide",
      runId,
      "--based-on",
      String(version),
      "--call",
      `${runId}/7`,
      "stop",
      "--db",
      db,
    ]);
    expect(result.code).toBe(1);
    expect(expectTwoLineError(result.stderr).reason).toContain(`run ${runId} has no call ${runId}/7`);
  });

  it("a good per-call decision exits 0 on the same version (so the refusals wrote nothing) and says who continues the run", async () => {
    const result = await runCli([
      "decide",
      runId,
      "--call",
      `${runId}/0`,
      "confirmed-completed",
      "--based-on",
      String(version),
      "--call-note",
      `${runId}/0`,
      "the line p-a is in the witness file",
      "--call-result",
      `${runId}/0`,
      '{"label":"p-a","recorded":true}',
      "--by",
      "ada",
      "--db",
      db,
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    // The decision and the run.resumed that follows it (nothing is left in doubt).
    expect(result.stdout).toContain(
      `recorded ${runId}/0 confirmed-completed on run ${runId} by ada (version ${version} → ${version + 2})`,
    );
    expect(result.stdout).toContain(
      `no runtime with agent "steps@1" is live now: the run continues when one opens this journal`,
    );
    expect(result.stdout).toContain(`the result given for ${runId}/0 was not checked`);
  });

  it("the decision is in `holdfast events --json`, once, with who, why and the version it was made on", async () => {
    const result = await runCli(["events", "--db", db, "--json"]);
    expect(result.code).toBe(0);
    const lines = parseJsonLines(result.stdout).filter((line) => line.streamId === `run-${runId}`);
    const decisions = lines.filter((line) => line.type === "decision.recorded");
    expect(decisions).toHaveLength(1);
    expect(decisions[0]).toMatchObject({
      streamId: `run-${runId}`,
      version: version + 1,
      payload: {
        basedOnVersion: version,
        decidedBy: "ada",
        calls: [
          {
            callId: `${runId}/0`,
            decision: "confirmed-completed",
            note: "the line p-a is in the witness file",
            result: { label: "p-a", recorded: true },
          },
        ],
        run: "continue",
      },
    });
    expect(lines.at(-1)).toMatchObject({ type: "run.resumed", version: version + 2 });
  });

  it("the next process with the agent registered continues the decided run; the confirmed effect is not repeated", async () => {
    const resumed = await runWorker({ ...workerEnv(), HF_ACTION: "recover" });
    const results = lineOf(resumed, "recovered")?.results as Array<{ runId: string; status: string }>;
    expect(results).toEqual([
      expect.objectContaining({
        runId,
        status: "completed",
        output: expect.objectContaining({ a: { label: "p-a", recorded: true } }),
      }),
    ]);
    expect(countOf(witness, "p-a")).toBe(1);
    expect(countOf(witness, "p-b")).toBe(1);
    expect(countOf(witness, "p-c")).toBe(1);
  });
});
