import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { runStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { applyRetention } from "../../src/runtime/retention.js";
import { type Given, givenJournal } from "../audit/given.js";
import { copyJournal } from "../audit/tamper.js";
import { runCli, useTempDir } from "../cli/cliProcess.js";

const tempDir = useTempDir();
let template: Given;
let templateDir: string;
beforeAll(async () => {
  templateDir = mkdtempSync(join(tmpdir(), "holdfast-retention-"));
  template = await givenJournal(templateDir);
});
afterAll(() => rmSync(templateDir, { recursive: true, force: true }));

const withJournal = async <T>(db: string, fn: (journal: LibsqlJournal) => Promise<T>): Promise<T> => {
  const journal = LibsqlJournal.open(db);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
};

const rawDump = (journal: LibsqlJournal) =>
  ["events", "projections", "admissions", "run_guard", "claims", "meta"].map((table) =>
    journal.unsafeDatabase().prepare(`SELECT * FROM ${table} ORDER BY 1, 2`).all(),
  );

describe("retention", () => {
  it("prune never removes the held run, and the audit passes afterwards", async () => {
    const db = copyJournal(template.db, tempDir());
    await withJournal(db, async (journal) => {
      const held = runStreamId(template.runs.held!);
      const before = await journal.readStream(held);
      const report = await journal.prune({ keepRuns: 0, keepDays: 0 });
      expect(report.pruned.map((r) => r.runId)).not.toContain(template.runs.held);
      // Every other run (twelve runs, a child among them) has finished and goes.
      expect(report.pruned).toHaveLength(11);
      expect(report.skipped).toEqual([]);
      expect(await journal.readStream(held)).toEqual(before);
      expect(await journal.activeRuns()).toEqual([template.runs.held]);
      expect(await journal.projection("runs", template.runs.held!)).toMatchObject({ status: "held" });
      const audit = await auditJournal(journal);
      expect(audit.findings).toEqual([]);
      expect(audit).toMatchObject({ runs: 1, prunedStreams: 11 });
    });
  });

  it("--dry-run writes nothing and lists what would go", async () => {
    const db = copyJournal(template.db, tempDir());
    await withJournal(db, async (journal) => {
      const before = rawDump(journal);
      const dry = await journal.prune({ keepRuns: 2, keepDays: 0, dryRun: true });
      expect(dry).toMatchObject({ dryRun: true, recorded: null, kept: 2 });
      expect(dry.pruned).toHaveLength(9);
      expect(rawDump(journal)).toEqual(before);
      const real = await journal.prune({ keepRuns: 2, keepDays: 0 });
      expect(real.pruned.map((r) => r.runId)).toEqual(dry.pruned.map((r) => r.runId));
    });
  });

  it("a child run is kept while its parent is kept", async () => {
    const db = copyJournal(template.db, tempDir());
    await withJournal(db, async (journal) => {
      const everything = (await journal.prune({ keepRuns: 0, keepDays: 0, dryRun: true })).pruned;
      const child = everything.find((r) => r.chatId.startsWith(`child:${template.runs.parent}/`));
      expect(child).toBeDefined();
      // Keep exactly the runs down to the parent: the child finished before it, so only the rule keeps it.
      const keep = everything.findIndex((r) => r.runId === template.runs.parent) + 1;
      const report = await journal.prune({ keepRuns: keep, keepDays: 0 });
      expect(report.pruned.map((r) => r.runId)).not.toContain(child!.runId);
      expect((await journal.readStream(runStreamId(child!.runId))).length).toBeGreaterThan(0);
      expect((await auditJournal(journal)).findings).toEqual([]);
    });
  });

  it("retention.pruned records each removed stream's head, and an anchor taken before the prune still verifies", async () => {
    const db = copyJournal(template.db, tempDir());
    await withJournal(db, async (journal) => {
      const anchor = await auditJournal(journal);
      const heads = new Map(
        await Promise.all(
          Object.values(template.runs).map(
            async (runId) => [runId, await journal.streamHead(runStreamId(runId))] as const,
          ),
        ),
      );
      const report = await journal.prune({ keepRuns: 0, keepDays: 0 });
      const sealed = (await journal.readStream("system")).at(-1)?.event;
      expect(sealed?.type).toBe("retention.pruned");
      if (sealed?.type !== "retention.pruned") return;
      expect(sealed.streams).toHaveLength(report.pruned.length);
      for (const entry of sealed.streams) {
        const head = heads.get(entry.streamId.slice("run-".length));
        if (head)
          expect({ version: entry.version, hash: entry.hash }).toEqual({
            version: head.version,
            hash: head.hash,
          });
      }
      const later = await auditJournal(journal, {
        expectHead: { digest: anchor.headDigest, position: anchor.lastPosition },
      });
      expect(later.findings).toEqual([]);
      expect(later.headDigest).not.toBe(anchor.headDigest);
    });
  });

  it("a run in progress is never pruned, and finishes normally after a prune from another connection", async () => {
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
    const runtime = await openRuntime({ store: db, agents: [quick, slow], tools: [wait] });
    try {
      for (const i of [1, 2, 3]) {
        const done = await runtime.submit({ chatId: `c${i}`, inputId: "m", agent: "quick", content: null });
        await done.result;
      }
      const live = await runtime.submit({ chatId: "live", inputId: "m", agent: "slow", content: null });
      await running;
      const report = await withJournal(db, (journal) => journal.prune({ keepRuns: 0, keepDays: 0 }));
      expect(report.pruned).toHaveLength(3);
      expect(report.pruned.map((r) => r.runId)).not.toContain(live.runId);
      open();
      expect(await live.result).toMatchObject({ status: "completed", output: "opened" });
    } finally {
      open();
      await runtime.close();
    }
    await withJournal(db, async (journal) => {
      const audit = await auditJournal(journal);
      expect(audit.findings).toEqual([]);
      expect(audit).toMatchObject({ runs: 1, prunedStreams: 3 });
    });
  });

  it("applyRetention applies a policy with defaults for what it leaves out, and does nothing when disabled", async () => {
    const db = copyJournal(template.db, tempDir());
    await withJournal(db, async (journal) => {
      expect(await applyRetention(journal, false)).toBeNull();
      // Everything finished today: the default 30 days keep it all.
      expect((await applyRetention(journal))?.pruned).toEqual([]);
      expect((await applyRetention(journal, { keepDays: 0, keepRuns: 10 }))?.pruned).toHaveLength(1);
    });
  });

  it("holdfast prune --dry-run lists the runs and writes nothing; without it they go and the audit stays clean", async () => {
    const db = copyJournal(template.db, tempDir());
    const dry = await runCli([
      "prune",
      "--db",
      db,
      "--keep-runs",
      "1",
      "--keep-days",
      "0",
      "--dry-run",
      "--json",
    ]);
    expect(dry.code, dry.stderr).toBe(0);
    const listed = JSON.parse(dry.stdout) as { pruned: Array<{ runId: string }>; recorded: unknown };
    expect(listed.pruned).toHaveLength(10);
    expect(listed.recorded).toBeNull();
    const human = await runCli(["prune", "--db", db, "--keep-runs", "1", "--keep-days", "0"]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain("removed 10 finished runs; kept 1");
    expect(human.stdout).toContain("recorded retention.pruned as system@1");
    await withJournal(db, async (journal) => expect((await auditJournal(journal)).findings).toEqual([]));
  });
  it("holdfast prune --batch N removes N runs per transaction, each batch with its own retention.pruned, listed in --json records", async () => {
    const db = copyJournal(template.db, tempDir());
    const refused = await runCli(["prune", "--db", db, "--batch", "0"]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain("--batch takes a whole number ≥ 1");
    const json = await runCli([
      "prune",
      "--db",
      db,
      "--keep-runs",
      "1",
      "--keep-days",
      "0",
      "--batch",
      "4",
      "--json",
    ]);
    expect(json.code, json.stderr).toBe(0);
    const report = JSON.parse(json.stdout) as {
      pruned: unknown[];
      records: Array<{ streamId: string; version: number }>;
      recorded: { streamId: string; version: number };
    };
    expect(report.pruned).toHaveLength(10);
    expect(report.records).toEqual([1, 2, 3].map((version) => ({ streamId: "system", version })));
    expect(report.recorded).toEqual({ streamId: "system", version: 3 });
    await withJournal(db, async (journal) => {
      const sealed = (await journal.readStream("system")).map((e) =>
        e.event.type === "retention.pruned" ? e.event.streams.length : 0,
      );
      expect(sealed).toEqual([4, 4, 2]);
      expect((await auditJournal(journal)).findings).toEqual([]);
    });
  });
});
