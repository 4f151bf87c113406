import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { defineAgent, defineTool, openRuntime, type Runtime } from "../../src/index.js";
import { type Given, givenJournal } from "../audit/given.js";
import { copyJournal } from "../audit/tamper.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
let template: Given;
let templateDir: string;
beforeAll(async () => {
  templateDir = mkdtempSync(join(tmpdir(), "holdfast-retention-open-"));
  template = await givenJournal(templateDir);
});
afterAll(() => rmSync(templateDir, { recursive: true, force: true }));

/** Every stored row of the tables retention changes, to show that nothing was written. */
const rawDump = (db: string) => {
  const journal = LibsqlJournal.open(db);
  try {
    return ["events", "projections", "admissions", "run_guard"].map((table) =>
      journal.unsafeDatabase().prepare(`SELECT * FROM ${table} ORDER BY 1, 2`).all(),
    );
  } finally {
    void journal.close();
  }
};

const withRuntime = async <T>(runtime: Runtime, fn: (runtime: Runtime) => Promise<T>): Promise<T> => {
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
};

describe("retention on open", () => {
  it("configured retention prunes the finished runs beyond the policy after recovery, never the held run, and the audit passes", async () => {
    const db = copyJournal(template.db, tempDir());
    await withRuntime(
      await openRuntime({ store: db, retention: { keepRuns: 2, keepDays: 0 } }),
      async (rt) => {
        const pruned = rt.retention?.pruned.map((r) => r.runId) ?? [];
        // Eleven finished runs, the newest two kept.
        expect(pruned).toHaveLength(9);
        expect(rt.retention).toMatchObject({ dryRun: false, kept: 2, skipped: [] });
        expect(rt.retention?.recorded?.streamId).toBe("system");
        expect(pruned).not.toContain(template.runs.held);
        const runs = await rt.runs();
        expect(runs).toHaveLength(3);
        expect(runs.map((r) => r.runId).filter((runId) => pruned.includes(runId))).toEqual([]);
        expect(runs.find((r) => r.runId === template.runs.held)).toMatchObject({ status: "held" });
        for (const runId of pruned) expect(await rt.events(runId)).toEqual([]);
        const audit = await rt.audit();
        expect(audit.findings).toEqual([]);
        expect(audit).toMatchObject({ prunedStreams: 9 });
      },
    );
  });

  it("without retention configured (or with retention: false), opening prunes nothing and writes nothing for it", async () => {
    const db = copyJournal(template.db, tempDir());
    const before = rawDump(db);
    for (const options of [{}, { retention: false as const }]) {
      await withRuntime(await openRuntime({ store: db, ...options }), async (rt) => {
        expect(rt.retention).toBeNull();
        expect(await rt.runs()).toHaveLength(Object.keys(template.runs).length + 1);
      });
    }
    expect(rawDump(db)).toEqual(before);
  });

  it("retention: {} applies the defaults (100 runs, 30 days): runs finished today all stay", async () => {
    const db = copyJournal(template.db, tempDir());
    await withRuntime(await openRuntime({ store: db, retention: {} }), async (rt) => {
      expect(rt.retention).toMatchObject({ pruned: [], recorded: null, kept: 11 });
    });
  });

  it("a run in progress in another runtime is never pruned by a second runtime opening with retention", async () => {
    const db = join(tempDir(), "journal.db");
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const wait = defineTool({
      name: "wait",
      args: Schema.Struct({}),
      run: async () => {
        started();
        await gate;
        return "opened";
      },
    });
    const quick = defineAgent({ name: "quick", version: "1", run: async () => "done" });
    const slow = defineAgent({ name: "slow", version: "1", run: async (turn) => turn.tool(wait, {}) });
    const first = await openRuntime({ store: db, agents: [quick, slow], tools: [wait] });
    try {
      for (const i of [1, 2, 3]) {
        const done = await first.submit({ chatId: `c${i}`, inputId: "m", agent: "quick", content: null });
        await done.result;
      }
      const live = await first.submit({ chatId: "live", inputId: "m", agent: "slow", content: null });
      await running;
      const second = await openRuntime({ store: db, retention: { keepRuns: 0, keepDays: 0 } });
      await withRuntime(second, async (rt) => {
        // A runtime without the run's agent never recovers it (and the live owner holds it anyway).
        expect(rt.recovery.notHere.map((r) => r.runId)).toContain(live.runId);
        expect(rt.retention?.pruned).toHaveLength(3);
        expect(rt.retention?.pruned.map((r) => r.runId)).not.toContain(live.runId);
      });
      open();
      expect(await live.result).toMatchObject({ status: "completed", output: "opened" });
      const audit = await first.audit();
      expect(audit.findings).toEqual([]);
      expect(audit).toMatchObject({ runs: 1, prunedStreams: 3 });
    } finally {
      open();
      await first.close();
    }
  });

  it("a policy that cannot be applied is refused before the journal is opened", async () => {
    const db = join(tempDir(), "journal.db");
    await expect(openRuntime({ store: db, retention: { keepRuns: -1 } })).rejects.toThrow(
      /keepRuns must be a whole number ≥ 0, got -1/,
    );
    await expect(openRuntime({ store: db, retention: { keepDays: Number.NaN } })).rejects.toThrow(
      /keepDays must be a number ≥ 0/,
    );
    expect(existsSync(db)).toBe(false);
  });
});
