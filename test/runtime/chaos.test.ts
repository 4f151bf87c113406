import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { lineOf, type ProcessResult, runScript } from "../support/processes.js";

const CHAOS_WORKER = join(import.meta.dirname, "..", "support", "chaos-worker.ts");

interface RunReport {
  readonly status: string;
  readonly reasons: ReadonlyArray<string>;
  readonly error?: { readonly name: string; readonly message: string };
}

/** What `errorInfo` records for a thrown value it cannot read. */
const UNREADABLE = "a value was thrown that cannot be read";

/**
 * One real child process meets every throw (test/support/chaos-worker.ts); each test below reads
 * one path's outcome from its report. An unhandled rejection or uncaught exception anywhere ends
 * the child with exit code 70 and an `unhandled` line, so every test here would fail.
 */
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

describe.each([
  ["libSQL", (dir: string) => Promise.resolve(join(dir, "journal.db"))],
  ["PostgreSQL", () => requirePg().then(() => pgUrl(schemas.fresh()))],
])("nothing holdfast runs can kill its host (chaos variant of review R1), on %s", (_engine, storeIn) => {
  let dir: string;
  let chaos: ProcessResult;
  let runs: Record<string, RunReport>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "holdfast-chaos-"));
    const store = await storeIn(dir);
    // Two runs left by processes that died: one to re-execute, one whose reconciler is asked.
    for (const which of ["reexec", "reconcile"]) {
      const prepared = await runScript(CHAOS_WORKER, {
        HF_STORE: store,
        HF_PHASE: "prepare",
        HF_CASE: which,
      });
      expect(prepared.signal, prepared.stderr).toBe("SIGKILL");
    }
    chaos = await runScript(CHAOS_WORKER, {
      HF_STORE: store,
      HF_PHASE: "chaos",
      HF_TOKEN_FILE: join(dir, "token"),
    });
    runs = (lineOf(chaos, "runs")?.runs ?? {}) as Record<string, RunReport>;
  }, 180_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("the process stays up: no unhandledRejection, no uncaughtException, a clean close, a clean audit", () => {
    expect(lineOf(chaos, "unhandled")).toBeUndefined();
    expect(chaos.code, chaos.stderr).toBe(0);
    expect(lineOf(chaos, "alive")).toBeDefined();
    expect(lineOf(chaos, "audit")?.findings).toEqual([]);
    expect(runs.healthy?.status).toBe("completed");
  });

  it("re-execution: a recovered agent that throws a value with no prototype ends failed with the error recorded, though nobody awaits the pass's `done`", () => {
    expect(runs.reexec?.status).toBe("failed");
    expect(runs.reexec?.error?.message).toContain(UNREADABLE);
  });

  it("an agent that throws, synchronously, an Error whose message cannot be read ends failed, though nobody awaits its `result`", () => {
    expect(runs["sync-throw"]?.status).toBe("failed");
    expect(runs["sync-throw"]?.error?.message).toContain(UNREADABLE);
  });

  it("a tool that throws such an Error while being called leaves its call in doubt: the run is held with the error recorded", () => {
    expect(runs["tool-odd"]?.status).toBe("held");
    expect(runs["tool-odd"]?.reasons.join()).toContain(UNREADABLE);
  });

  it("a call the agent never awaits fails definitely: recorded, and the run completes", () => {
    expect(runs.floating?.status).toBe("completed");
  });

  it("a reconciler's check that throws a value with no prototype holds the run reconcile-unknown with the failure recorded", () => {
    expect(runs.reconcile?.status).toBe("held");
    expect(runs.reconcile?.reasons.join()).toContain("reconcile-unknown");
    expect(runs.reconcile?.reasons.join()).toContain(UNREADABLE);
  });

  it("a reconciler's clean-up (`settled`) that throws after the outcome is recorded is a warning; the run completes", () => {
    expect(runs.settled?.status).toBe("completed");
    expect(chaos.stderr).toContain("HOLDFAST_SETTLE_CLEANUP");
  });

  it("an integration's callback: an AI SDK provider that throws an unreadable Error holds the model call in doubt", () => {
    expect(runs.model?.status).toBe("held");
    expect(runs.model?.reasons.join()).toContain(UNREADABLE);
  });

  it("subscribers that throw in their loop, stop after one event, or throw into their iterator harm nothing; another still sees the three completions", () => {
    expect(chaos.lines.filter((l) => l.kind === "subscriber").map((l) => l.which)).toEqual(
      expect.arrayContaining(["threw in its loop", "took one event and stopped", "threw into its iterator"]),
    );
    expect(lineOf(chaos, "runs")?.completedSeen).toBe(3);
  });

  it("the HTTP server answers 500 when the runtime behind it throws unreadable values, and serves on", () => {
    expect(lineOf(chaos, "http")).toMatchObject({ decide: 500, retry: 500, after: 200 });
  });
});
