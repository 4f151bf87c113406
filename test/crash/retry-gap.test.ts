import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { AnyEvent, EventOf, RecordedEvent } from "../../src/events/index.js";
import { openRuntime } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { lineOf, runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());
const WORKER = join(import.meta.dirname, "..", "support", "retry-gap-worker.ts");

const ofType = <T extends AnyEvent["type"]>(events: ReadonlyArray<AnyEvent>, type: T) =>
  events.filter((e): e is EventOf<T> => e.type === type);

const engines = ["libsql", "postgres"] as const;

const freshStore = async (engine: (typeof engines)[number], dir: string): Promise<string> => {
  if (engine === "libsql") return join(dir, "journal.db");
  await requirePg();
  return pgUrl(schemas.fresh());
};

/** The attempts the tool started, from the witness file. */
const witnessed = (witness: string): number[] =>
  existsSync(witness)
    ? readFileSync(witness, "utf8")
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as { attempt: number }).attempt)
    : [];

/** The run's recorded events and the audit's findings, read by a fresh runtime that recovers nothing. */
const journalOf = async (db: string) => {
  const runtime = await openRuntime({ store: db, agents: [], tools: [], recovery: { onOpen: false } });
  try {
    const [run] = await runtime.runs();
    const recorded: ReadonlyArray<RecordedEvent> = await runtime.events(run!.runId);
    return { run: run!, recorded, events: recorded.map((e) => e.event), audit: await runtime.audit() };
  } finally {
    await runtime.close();
  }
};

/**
 * Submit, killed at `after-failed` when `crashEvery` says so, then recover until a process ends
 * on its own (at most `limit` processes in all).
 */
const drive = async (env: Record<string, string>, crashEvery: boolean, limit = 6) => {
  const crash = { HOLDFAST_CRASH_AT: "after-failed" };
  const first = await runScript(WORKER, { ...env, ...crash, HF_ACTION: "submit" });
  expect(first.signal, first.stderr).toBe("SIGKILL");
  let kills = 1;
  for (let i = 1; i < limit; i++) {
    const next = await runScript(WORKER, { ...env, ...(crashEvery ? crash : {}), HF_ACTION: "recover" });
    if (next.signal === "SIGKILL") {
      kills++;
      continue;
    }
    expect(next.code, next.stderr).toBe(0);
    return { kills, results: lineOf(next, "recovered")?.results as Array<Record<string, unknown>> };
  }
  throw new Error(`still crashing after ${limit} processes`);
};

describe.each(engines)("a crash between call.failed and retry.scheduled on %s", (engine) => {
  it("SIGKILL right after the failure commits: re-execution schedules the policy's retry (due from the recorded failure, its Retry-After honoured) and the run completes with exactly the policy's attempts", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.jsonl");
    const db = await freshStore(engine, dir);
    const { kills, results } = await drive(
      { HF_DB: db, HF_WITNESS: witness, HF_ATTEMPTS: "3", HF_SUCCEED_AT: "3" },
      false,
    );
    expect(kills).toBe(1);
    expect(results).toEqual([
      expect.objectContaining({ status: "completed", output: { label: "x", attempt: 3 } }),
    ]);
    expect(witnessed(witness)).toEqual([1, 2, 3]);

    const { recorded, events, audit } = await journalOf(db);
    expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2, 3]);
    const scheduled = ofType(events, "retry.scheduled");
    expect(scheduled.map((s) => [s.attempt, s.delayMs, s.reason])).toEqual([
      [2, 1000, "retry-after"],
      [3, 1000, "retry-after"],
    ]);
    // The retry of attempt 1 was written by the re-executing process, after the interruption.
    const types = events.map((e) => e.type);
    expect(types.indexOf("run.interrupted")).toBeGreaterThan(types.indexOf("call.failed"));
    expect(types.indexOf("retry.scheduled")).toBeGreaterThan(types.indexOf("run.interrupted"));
    const firstFailure = recorded.find((r) => r.event.type === "call.failed")!;
    expect(scheduled[0]!.dueAt).toBe(new Date(Date.parse(firstFailure.recordedAt) + 1000).toISOString());
    expect(audit.findings).toEqual([]);
  }, 120_000);

  it("a process killed after every failure: each re-execution retries once, never more attempts than the policy; the last failure stands", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.jsonl");
    const db = await freshStore(engine, dir);
    const { kills, results } = await drive({ HF_DB: db, HF_WITNESS: witness, HF_ATTEMPTS: "3" }, true);
    expect(kills).toBe(3);
    expect(results).toEqual([
      expect.objectContaining({ status: "completed", output: { callFailed: "503 refused" } }),
    ]);
    expect(witnessed(witness)).toEqual([1, 2, 3]);
    const { events, audit } = await journalOf(db);
    expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2, 3]);
    expect(ofType(events, "call.failed").map((f) => f.attempt)).toEqual([1, 2, 3]);
    expect(ofType(events, "retry.scheduled").map((s) => s.attempt)).toEqual([2, 3]);
    expect(events.some((e) => e.type === "run.held")).toBe(false);
    expect(audit.findings).toEqual([]);
  }, 180_000);

  it("killed after the last attempt's failure: no retry.scheduled is appended, the failure stands (CallFailed)", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.jsonl");
    const db = await freshStore(engine, dir);
    // Attempt 1's failure passes the crash point; attempt 2's (the policy's last) is killed there.
    const { kills, results } = await drive(
      { HF_DB: db, HF_WITNESS: witness, HF_ATTEMPTS: "2", HOLDFAST_CRASH_SKIP: "1" },
      false,
    );
    expect(kills).toBe(1);
    expect(results).toEqual([
      expect.objectContaining({ status: "completed", output: { callFailed: "503 refused" } }),
    ]);
    expect(witnessed(witness)).toEqual([1, 2]);
    const { events, audit } = await journalOf(db);
    expect(ofType(events, "retry.scheduled").map((s) => s.attempt)).toEqual([2]);
    expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2]);
    expect(audit.findings).toEqual([]);
  }, 120_000);

  it("a policy whose when rejects the recorded failure: re-execution appends no retry, the failure stands", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.jsonl");
    const db = await freshStore(engine, dir);
    const { kills, results } = await drive(
      { HF_DB: db, HF_WITNESS: witness, HF_ATTEMPTS: "3", HF_STATUS: "400" },
      false,
    );
    expect(kills).toBe(1);
    expect(results).toEqual([
      expect.objectContaining({ status: "completed", output: { callFailed: "400 refused" } }),
    ]);
    expect(witnessed(witness)).toEqual([1]);
    const { events, audit } = await journalOf(db);
    expect(ofType(events, "retry.scheduled")).toEqual([]);
    expect(audit.findings).toEqual([]);
  }, 120_000);

  it("a failure the live policy declined, after which the agent went on: re-execution serves it and never retries it", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.jsonl");
    const db = await freshStore(engine, dir);
    const env = { HF_DB: db, HF_WITNESS: witness, HF_ATTEMPTS: "3", HF_STATUS: "503", HF_THEN: "1" };
    // Live, `when` declines the 503 (it reads something the recorded failure does not carry); the
    // agent catches CallFailed and calls `then`, and the process dies once that outcome is committed.
    const first = await runScript(WORKER, {
      ...env,
      HF_DECLINE_LIVE: "1",
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "then",
    });
    expect(first.signal, first.stderr).toBe("SIGKILL");
    // Re-executed where `when` would accept the same failure: the execution had gone on past it.
    const next = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
    expect(next.code, next.stderr).toBe(0);
    expect(lineOf(next, "recovered")?.results).toEqual([
      expect.objectContaining({
        status: "completed",
        output: { callFailed: "503 refused", wentOn: "went on" },
      }),
    ]);
    expect(witnessed(witness)).toEqual([1, 1]);
    const { events, audit } = await journalOf(db);
    expect(ofType(events, "retry.scheduled")).toEqual([]);
    expect(audit.findings).toEqual([]);
  }, 120_000);
});
