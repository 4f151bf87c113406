import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { AnyEvent } from "../../src/events/index.js";
import { lineOf, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const tempDir = useTempDir();

interface Scenario {
  readonly crashAt: string;
  readonly crashCall: string;
  readonly restart?: Record<string, string>;
}

/** Submit the table agent, SIGKILL it at a crash point, restart once, and return what happened. */
const crashAndRecover = async ({ crashAt, crashCall, restart = {} }: Scenario) => {
  const dir = tempDir();
  const db = join(dir, "journal.db");
  const witness = join(dir, "witness.txt");
  const base = {
    HF_DB: db,
    HF_WITNESS: witness,
    HF_CHAT: "c",
    HF_INPUT: "i",
    HF_PREFIX: "p",
    HF_AGENT: "table",
  };
  const first = await runWorker({
    ...base,
    HF_ACTION: "submit",
    HOLDFAST_CRASH_AT: crashAt,
    HOLDFAST_CRASH_CALL: crashCall,
  });
  expect(first.signal, first.stderr).toBe("SIGKILL");
  const second = await runWorker({ ...base, ...restart, HF_ACTION: "recover" });
  expect(second.code, second.stderr).toBe(0);
  const journal = LibsqlJournal.open(db);
  const events: AnyEvent[] = (await journal.readAll({ after: 0, limit: 10_000 })).map((e) => e.event);
  await journal.close();
  return {
    report: lineOf(second, "recovery")?.report as Record<string, unknown[]>,
    results: (lineOf(second, "recovered")?.results ?? []) as Array<Record<string, unknown>>,
    preflight: lineOf(second, "preflight")?.findings as unknown[],
    witness: witnessLines(witness),
    events,
    types: events.map((e) => e.type),
  };
};

const count = (lines: string[], prefix: string) => lines.filter((l) => l.startsWith(prefix)).length;

describe("recovery table", () => {
  it("disposition replay with equal pins: the call is authorized (allowlisted) and runs again", async () => {
    const r = await crashAndRecover({ crashAt: "after-effect-before-outcome", crashCall: "read_safe" });
    expect(r.events).toContainEqual(
      expect.objectContaining({ type: "call.replay-authorized", reason: "allowlisted" }),
    );
    expect(r.results.map((x) => x.status)).toEqual(["completed"]);
    // Read-only, allowlisted: running it twice is what the safe list permits.
    expect(count(r.witness, "read p-read")).toBe(2);
    expect(count(r.witness, "sent p-sent")).toBe(1);
  });

  it("a tool whose source was edited after the intent is held, not replayed", async () => {
    const r = await crashAndRecover({
      crashAt: "after-intent",
      crashCall: "read_safe",
      restart: { HF_TOOLS_EDITED: "1" },
    });
    expect(r.preflight).toContainEqual(
      expect.objectContaining({ tool: "read_safe", problem: "pin-mismatch" }),
    );
    expect(r.types).not.toContain("call.replay-authorized");
    expect(r.results).toEqual([]);
    expect(r.report.held).toEqual([
      expect.objectContaining({ reasons: [expect.objectContaining({ code: "pin-mismatch" })] }),
    ]);
    expect(count(r.witness, "read")).toBe(0);
  });

  it("a tool that asks for replay but is not on the safe list is recorded as hold and held", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "w.txt");
    const base = {
      HF_DB: db,
      HF_WITNESS: witness,
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HF_AGENT: "table",
      HF_ALLOWLIST: "none",
    };
    const first = await runWorker({
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "read_safe",
    });
    expect(first.signal).toBe("SIGKILL");
    expect(lineOf(first, "preflight")?.findings).toContainEqual(
      expect.objectContaining({ problem: "not-allowlisted" }),
    );
    const second = await runWorker({ ...base, HF_ACTION: "recover", HF_ALLOWLIST: "" });
    const journal = LibsqlJournal.open(db);
    const events = (await journal.readAll({ after: 0, limit: 100 })).map((e) => e.event);
    await journal.close();
    // The intent recorded "hold" when it was made; allowlisting the tool later changes nothing for it.
    expect(events.find((e) => e.type === "call.intended")).toMatchObject({
      name: "read_safe",
      disposition: "hold",
    });
    expect(lineOf(second, "recovery")?.report).toMatchObject({ held: [expect.objectContaining({})] });
    expect(count(witnessLines(witness), "read")).toBe(0);
  });

  it("a reconciler that proves the call completed: its result is reused and the effect is not repeated", async () => {
    const r = await crashAndRecover({ crashAt: "after-effect-before-outcome", crashCall: "reconciled" });
    expect(r.events).toContainEqual(
      expect.objectContaining({ type: "call.reconciled", outcome: "completed" }),
    );
    expect(r.results.map((x) => x.status)).toEqual(["completed"]);
    expect(r.results[0]?.output).toMatchObject({ sent: { label: "p-sent", sent: true } });
    expect(count(r.witness, "sent p-sent")).toBe(1);
    expect(count(r.witness, "p-rec")).toBe(1);
  });

  it("a reconciler that proves the call did not start: the call runs exactly once", async () => {
    const r = await crashAndRecover({ crashAt: "after-intent", crashCall: "reconciled" });
    expect(r.events).toContainEqual(
      expect.objectContaining({ type: "call.reconciled", outcome: "not-completed" }),
    );
    expect(r.events).toContainEqual(
      expect.objectContaining({ type: "call.intended", name: "reconciled", attempt: 2 }),
    );
    expect(r.results.map((x) => x.status)).toEqual(["completed"]);
    expect(count(r.witness, "sent p-sent")).toBe(1);
  });

  it("a reconciler that answers unknown holds the run", async () => {
    const r = await crashAndRecover({
      crashAt: "after-effect-before-outcome",
      crashCall: "reconciled",
      restart: { HF_RECONCILER: "unknown" },
    });
    expect(r.report.held).toEqual([
      expect.objectContaining({ reasons: [expect.objectContaining({ code: "reconcile-unknown" })] }),
    ]);
    expect(r.types).not.toContain("call.reconciled");
    expect(count(r.witness, "sent p-sent")).toBe(1);
  });

  it("a reconciler that throws holds the run", async () => {
    const r = await crashAndRecover({
      crashAt: "after-intent",
      crashCall: "reconciled",
      restart: { HF_RECONCILER: "throws" },
    });
    expect(r.report.held).toEqual([
      expect.objectContaining({ reasons: [expect.objectContaining({ code: "reconcile-unknown" })] }),
    ]);
    expect(count(r.witness, "sent")).toBe(0);
  });

  it("disposition hold: an in-doubt call holds the run and is not repeated", async () => {
    const r = await crashAndRecover({ crashAt: "after-effect-before-outcome", crashCall: "record" });
    expect(r.report.held).toEqual([
      expect.objectContaining({ reasons: [expect.objectContaining({ code: "in-doubt" })] }),
    ]);
    expect(r.types.slice(-2)).toEqual(["run.interrupted", "run.held"]);
    expect(count(r.witness, "p-rec")).toBe(1);
  });
});
