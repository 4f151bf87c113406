import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { runPage } from "../../src/adapters/surfaces/http/pages.js";
import { runView } from "../../src/adapters/surfaces/http/views.js";
import { openRuntime, serve } from "../../src/index.js";
import { runCli } from "../cli/cliProcess.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { lineOf, type ProcessResult, runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const LOOP_WORKER = join(import.meta.dirname, "..", "support", "loop-worker.ts");

const start = (store: string, env: Record<string, string> = {}): Promise<ProcessResult> =>
  runScript(LOOP_WORKER, { HF_STORE: store, HF_ACTION: "recover", ...env });

/** The run's events and row, read by a runtime that has no agents (an operator's). */
const inspect = async (store: string) => {
  const operator = await openRuntime({ store, agents: [], recovery: { onOpen: false } });
  try {
    const [run] = await operator.runs();
    const events = await operator.events(run!.runId);
    return { run: run!, types: events.map((e) => e.event.type), events };
  } finally {
    await operator.close();
  }
};

/**
 * Three starts that all die at the same point: the process that submitted, then two recoveries;
 * the fourth start records the third interruption and holds the run instead of re-executing it.
 */
const loopUntilHeld = async (store: string, env: Record<string, string> = {}) => {
  const first = await start(store, { HF_ACTION: "submit", ...env });
  expect(first.signal, first.stderr).toBe("SIGKILL");
  for (let i = 0; i < 2; i++) {
    const again = await start(store, env);
    expect(again.signal, again.stderr).toBe("SIGKILL");
  }
  const fourth = await start(store, env);
  expect(fourth.code, fourth.stderr).toBe(0);
  return fourth;
};

const crashLoopReason = (row: { heldReasons: ReadonlyArray<{ code: string }> }) =>
  row.heldReasons.find((r) => r.code === "crash-loop") as
    | { code: string; detail: string; interruptions: Array<{ at: string; by: string }> }
    | undefined;

describe("the crash-loop cap (DESIGN §13)", () => {
  it("a run whose agent kills its process at the same point every time is held crash-loop after three interruptions; the next process stays up and does not run it; resume starts the count again", async () => {
    const store = join(tempDir(), "journal.db");
    const fourth = await loopUntilHeld(store);
    const report = lineOf(fourth, "recovery")?.report as {
      resumed: string[];
      held: Array<{ runId: string; reasons: Array<{ code: string }> }>;
    };
    expect(report.resumed).toEqual([]);
    expect(report.held[0]?.reasons.map((r) => r.code)).toEqual(["crash-loop"]);

    const { run, types, events } = await inspect(store);
    expect(run.status).toBe("held");
    expect(types.filter((t) => t === "run.interrupted")).toHaveLength(3);
    expect(types.slice(-2)).toEqual(["run.interrupted", "run.held"]);
    // Each process died: no interruption names a cause, so every one counts (decision 0086).
    for (const { event } of events)
      if (event.type === "run.interrupted") expect(event.cause, "a crash has no cause").toBeUndefined();
    const reason = crashLoopReason(run)!;
    expect(reason.interruptions.map((i) => i.at.slice(0, 10))).toHaveLength(3);
    expect(reason.interruptions.slice(0, 2).map((i) => i.at)).toEqual(
      events
        .filter((e) => e.event.type === "run.interrupted")
        .map((e) => e.recordedAt)
        .slice(0, 2),
    );
    expect(reason.detail).toContain("interrupted 3 times");

    // The next process that opens the journal leaves the held run alone, and stays up.
    const fifth = await start(store);
    expect(fifth.code, fifth.stderr).toBe(0);
    expect((lineOf(fifth, "recovery")?.report as { resumed?: string[] } | undefined)?.resumed).toEqual([]);
    expect((await inspect(store)).types).toEqual(types);

    // `holdfast show` says why, how many times and when.
    const shown = await runCli(["show", run.runId, "--db", store]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain("crash-loop: the run was interrupted 3 times");
    for (const { at } of reason.interruptions) expect(shown.stdout).toContain(`interrupted ${at}`);
    expect(shown.stdout).toContain(`holdfast decide ${run.runId} resume`);

    // The API's run view carries the reason with its interruptions.
    const server = await serve({ store, port: 0, tokenFile: join(tempDir(), "token") });
    try {
      const response = await server.app.request(`/api/runs/${run.runId}`, {
        headers: { host: `127.0.0.1:${server.port}`, authorization: `Bearer ${server.token.token}` },
      });
      expect(response.status).toBe(200);
      const view = (await response.json()) as { run: { heldReasons: unknown[] } };
      expect(view.run.heldReasons).toEqual([
        expect.objectContaining({ code: "crash-loop", interruptions: reason.interruptions }),
      ]);
    } finally {
      await server.close();
    }

    // The panel's run page lists them under "Why it is held".
    const reader = LibsqlJournal.open(store);
    try {
      const session = { id: "s", csrf: "c", name: "ada", expiresAt: Date.now() + 60_000 };
      const page = String(await runPage(await runView(reader, run.runId), session));
      expect(page).toContain("<strong>crash-loop</strong>");
      for (const { at } of reason.interruptions) expect(page).toContain(`<time datetime="${at}">`);
    } finally {
      await reader.close();
    }

    // A person decides resume: the decision resets the count, so the run is re-executed again.
    const operator = await openRuntime({ store, agents: [], recovery: { onOpen: false } });
    await operator.decide(run.runId, { decision: "resume", basedOnVersion: run.version, decidedBy: "ada" });
    await operator.close();
    const afterDecision = await start(store);
    expect(afterDecision.signal, "re-executed (and died again), not held").toBe("SIGKILL");
    const fixed = await start(store, { HF_FIXED: "1" });
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(
      (lineOf(fixed, "recovered")?.results as Array<{ status: string }> | undefined)?.map((r) => r.status),
    ).toEqual(["completed"]);
    const audit = await openRuntime({ store, agents: [], recovery: { onOpen: false } });
    try {
      expect((await audit.audit()).findings).toEqual([]);
    } finally {
      await audit.close();
    }
  }, 300_000);

  it("crash-loop: a reconciled tool that kills its process is held after three interruptions, though its reconciler answers not-completed on every pass", async () => {
    const store = join(tempDir(), "journal.db");
    const fourth = await loopUntilHeld(store, { HF_LOOP: "reconciled" });
    const report = lineOf(fourth, "recovery")?.report as {
      resumed: string[];
      held: Array<{ reasons: Array<{ code: string }> }>;
    };
    expect(report.resumed).toEqual([]);
    expect(report.held[0]?.reasons.map((r) => r.code)).toEqual(["crash-loop"]);

    const { run, types, events } = await inspect(store);
    expect(run.status).toBe("held");
    // Each pass proved the attempt did not happen; that is no progress, so the count went on.
    const verdicts = events.flatMap((e) => (e.event.type === "call.reconciled" ? [e.event.outcome] : []));
    expect(verdicts).toEqual(["not-completed", "not-completed", "not-completed"]);
    expect(types.filter((t) => t === "run.interrupted")).toHaveLength(3);
    expect(types.slice(-3)).toEqual(["run.interrupted", "call.reconciled", "run.held"]);
    expect(types).not.toContain("call.replay-authorized");
    const reason = crashLoopReason(run)!;
    expect(reason.interruptions).toHaveLength(3);
    expect(reason.detail).toContain("interrupted 3 times");

    const next = await start(store, { HF_LOOP: "reconciled" });
    expect(next.code, next.stderr).toBe(0);
    expect((await inspect(store)).types).toEqual(types);
  }, 300_000);

  it("crash-loop: a replay-policy model call that kills its process is held at the third interruption, instead of being authorized to run again", async () => {
    const store = join(tempDir(), "journal.db");
    const env = { HF_LOOP: "replay" };
    const fourth = await loopUntilHeld(store, env);
    const report = lineOf(fourth, "recovery")?.report as {
      resumed: string[];
      replayed: string[];
      held: Array<{ reasons: Array<{ code: string; callId?: string }> }>;
    };
    expect(report.resumed).toEqual([]);
    expect(report.replayed).toEqual([]);
    expect(report.held[0]?.reasons.map((r) => r.code)).toEqual(["crash-loop", "in-doubt"]);

    const { run, types } = await inspect(store);
    expect(run.status).toBe("held");
    expect(types.filter((t) => t === "run.interrupted")).toHaveLength(3);
    // The second and third starts authorized the replay; the fourth records the hold instead.
    expect(types.filter((t) => t === "call.replay-authorized")).toHaveLength(2);
    expect(types.slice(-2)).toEqual(["run.interrupted", "run.held"]);
    const reason = crashLoopReason(run)!;
    expect(reason.interruptions).toHaveLength(3);
    expect(reason.detail).toContain("interrupted 3 times");
    const [call] = report.held[0]!.reasons.filter((r) => r.code === "in-doubt");

    // The call waits for a person; new-attempt runs it again once the model no longer kills.
    const operator = await openRuntime({ store, agents: [], recovery: { onOpen: false } });
    await operator.decide(run.runId, {
      calls: { [call!.callId!]: { decision: "new-attempt" } },
      basedOnVersion: run.version,
      decidedBy: "ada",
    });
    await operator.close();
    const fixed = await start(store, { ...env, HF_FIXED: "1" });
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(
      (lineOf(fixed, "recovered")?.results as Array<{ status: string }> | undefined)?.map((r) => r.status),
    ).toEqual(["completed"]);
  }, 300_000);

  it("recovery.maxInterruptions sets the cap; a stop decision ends a crash-looping run", async () => {
    const store = join(tempDir(), "journal.db");
    const first = await start(store, { HF_ACTION: "submit", HF_MAX_INTERRUPTIONS: "1" });
    expect(first.signal).toBe("SIGKILL");
    const second = await start(store, { HF_MAX_INTERRUPTIONS: "1" });
    expect(second.code, second.stderr).toBe(0);
    const { run } = await inspect(store);
    expect(run.status).toBe("held");
    expect(crashLoopReason(run)?.interruptions).toHaveLength(1);
    const operator = await openRuntime({ store, agents: [], recovery: { onOpen: false } });
    try {
      const { result } = await operator.decide(run.runId, {
        decision: "stop",
        basedOnVersion: run.version,
        decidedBy: "ada",
      });
      expect((await result).status).toBe("stopped");
    } finally {
      await operator.close();
    }
  }, 60_000);

  it("on PostgreSQL, worker processes taking turns count the same interruptions: the run is held crash-loop and the next worker stays up", async () => {
    await requirePg();
    const store = pgUrl(schemas.fresh());
    const first = await start(store, { HF_ACTION: "submit" });
    expect(first.signal, first.stderr).toBe("SIGKILL");
    for (let i = 1; i <= 2; i++) {
      const turn = await start(store);
      expect(turn.signal, turn.stderr).toBe("SIGKILL");
    }
    const fourth = await start(store);
    expect(fourth.code, fourth.stderr).toBe(0);
    const { run, types, events } = await inspect(store);
    expect(run.status).toBe("held");
    // Each start after the first took the run over from the dead process before it: a claim each.
    expect(types.filter((t) => t === "run.claimed")).toHaveLength(3);
    const detectedBy = events.flatMap((e) =>
      e.event.type === "run.interrupted" ? [e.event.detectedBy] : [],
    );
    expect(new Set(detectedBy).size).toBe(3);
    expect(crashLoopReason(run)?.interruptions.map((i) => i.by)).toEqual(detectedBy);
    const next = await start(store);
    expect(next.code, next.stderr).toBe(0);
    expect((await inspect(store)).types).toEqual(types);
  }, 300_000);
});
