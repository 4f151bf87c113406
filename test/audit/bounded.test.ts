import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { temporarySpill } from "../../src/adapters/stores/libsql/temporarySpill.js";
import { type AnyEvent, runStreamId } from "../../src/events/index.js";
import { inlineProjections } from "../../src/projections/index.js";
import {
  type AuditOptions,
  type AuditReport,
  type AuditSpill,
  auditJournal,
  LogAuditor,
  memorySpill,
} from "../../src/runtime/audit.js";
import { useTempDir } from "../support/tmp.js";
import { type Given, givenJournal } from "./given.js";
import { writeManyRuns } from "./manyRuns.js";
import { alignCaches, copyJournal, forgeChained, tamper } from "./tamper.js";

const tempDir = useTempDir();

/** 60 completed runs of 3 calls over 7 chats, and one run still open: 69 projection rows. */
const manyRuns = async (): Promise<LibsqlJournal> => {
  const journal = LibsqlJournal.open(join(tempDir(), "journal.db"));
  await writeManyRuns(journal, { finished: 60, calls: 3, chats: 7 });
  return journal;
};

/** Feed the whole log to `auditor` as the driver does, admissions included. */
const feedAll = async (journal: LibsqlJournal, auditor: LogAuditor): Promise<void> => {
  for (const row of await journal.readAllRows({ after: 0, limit: 1_000_000 })) auditor.feed(row);
  for (const check of auditor.takeAdmissionChecks())
    auditor.admissionFound(check, await journal.admission(check.chatId, check.inputId));
};

describe("F28: the audit holds what open runs need, not what the log holds", () => {
  it("F28: after many runs have ended the auditor holds no fold and no call records of them, and at most rowsInMemory rebuilt rows per projection", async () => {
    const journal = await manyRuns();
    try {
      const auditor = new LogAuditor({ rowsInMemory: 8 });
      await feedAll(journal, auditor);
      const retained = auditor.retained();
      // Only the open run keeps its fold and call records; every stream keeps its head.
      expect(retained).toMatchObject({ streams: 61, runFolds: 1, callRecords: 1 });
      expect(retained.rows).toBeLessThanOrEqual(inlineProjections.length * 8);
      expect(auditor.guardMismatches(new Set(await journal.activeRuns()))).toEqual([]);
    } finally {
      await journal.close();
    }
  });

  it("F28: the projection comparison holds at most one page of rebuilt rows at a time, and finds the journal clean", async () => {
    const journal = await manyRuns();
    try {
      const spill = memorySpill();
      let largestTake = 0;
      const counting: AuditSpill = {
        ...spill,
        take: (space, keys) => {
          const taken = spill.take(space, keys);
          largestTake = Math.max(largestTake, taken.size);
          return taken;
        },
      };
      const auditor = new LogAuditor({ rowsInMemory: 8, spill: counting });
      await feedAll(journal, auditor);
      const page = 7;
      for (const projection of inlineProjections) {
        let after: string | null = null;
        for (;;) {
          const stored = await journal.projectionPage(projection.name, { after, limit: page });
          auditor.compareStored(projection.name, stored);
          expect(auditor.retained().rows).toBe(0);
          if (stored.length < page) break;
          after = stored.at(-1)!.key;
        }
        auditor.endProjection(projection.name);
      }
      expect(largestTake).toBeGreaterThan(0);
      expect(largestTake).toBeLessThanOrEqual(page);
      const report = auditor.finish(false);
      expect(report.findings).toEqual([]);
      expect(report.projections).toEqual([
        { name: "runs", rows: 61 },
        { name: "chats", rows: 8 },
        { name: "documents", rows: 0 },
        { name: "conflicts", rows: 0 },
        { name: "graph-checkpoints", rows: 0 },
        { name: "graph-threads", rows: 0 },
        { name: "graph-channels", rows: 0 },
        { name: "schedules", rows: 0 },
      ]);
    } finally {
      await journal.close();
    }
  });
});

describe("a long audit shares the process", () => {
  it("the event loop turns between pages (a runtime's heartbeat, a server's requests run), in the log and in the projection comparison", async () => {
    const journal = await manyRuns();
    try {
      // Counts turns of the event loop (one per turn): it can only run when the audit lets the loop
      // turn, as a heartbeat's timer or a server's request would.
      let turns = 0;
      let stopped = false;
      const tick = () => {
        turns += 1;
        if (!stopped) setImmediate(tick);
      };
      setImmediate(tick);
      const seenAtProgress: number[] = [];
      const report = await auditJournal(journal, {
        pageSize: 5,
        progressEvery: 10,
        onProgress: () => seenAtProgress.push(turns),
      }).finally(() => {
        stopped = true;
      });
      expect(report.clean).toBe(true);
      // The log alone is read in dozens of pages: the timer ran while it was read, not only after.
      expect(seenAtProgress.length).toBeGreaterThan(20);
      expect(seenAtProgress.at(-1)).toBeGreaterThan(10);
      const afterLog = seenAtProgress.at(-1)!;
      // The projection comparison (69 rows, 5 a page) yields too.
      expect(turns).toBeGreaterThan(afterLog + 10);
    } finally {
      await journal.close();
    }
  });
});

describe("the audit with almost nothing at hand, spilled to memory or to a file, finds what it finds with everything at hand", () => {
  let template: Given;
  let templateDir: string;
  beforeAll(async () => {
    templateDir = mkdtempSync(join(tmpdir(), "holdfast-bounded-template-"));
    template = await givenJournal(templateDir);
  });
  afterAll(() => rmSync(templateDir, { recursive: true, force: true }));

  const audit = async (db: string, options: AuditOptions = {}): Promise<AuditReport> => {
    const journal = LibsqlJournal.openReadOnly(db);
    try {
      return await auditJournal(journal, options);
    } finally {
      await journal.close();
    }
  };
  /**
   * The same report with one row per projection at hand, the rest spilled to memory or to a sealed
   * temporary file, as with every row at hand.
   */
  const bothWays = async (db: string): Promise<AuditReport> => {
    const loose = await audit(db, { rowsInMemory: 1_000_000 });
    expect(await audit(db, { rowsInMemory: 1, pageSize: 2 })).toEqual(loose);
    const spill = () => temporarySpill({ memoryEntries: 0, seal: true, dir: tempDir() });
    expect(await audit(db, { rowsInMemory: 1, pageSize: 2, spill })).toEqual(loose);
    return loose;
  };
  const stream = (name: string) => runStreamId(template.runs[name]!);
  const forge = (name: string, event: (runId: string) => AnyEvent, align = true) => {
    const db = copyJournal(template.db, tempDir());
    const { version } = tamper(db, (sql) => forgeChained(sql, stream(name), event(template.runs[name]!)));
    if (align) alignCaches(db);
    return { db, version };
  };

  it("a clean journal from real runs", async () => {
    expect((await bothWays(copyJournal(template.db, tempDir()))).findings).toEqual([]);
  });

  it("edited, deleted and invented projection rows", async () => {
    const db = copyJournal(template.db, tempDir());
    tamper(db, (sql) => {
      sql
        .prepare(
          "UPDATE projections SET value = json_set(value, '$.status', 'completed') WHERE name = 'runs' AND key = ?",
        )
        .run(template.runs.held);
      sql.prepare("DELETE FROM projections WHERE name = 'chats'").run();
      sql
        .prepare(
          "INSERT INTO projections (name, key, value, position) VALUES ('documents', 'ghost', '{}', 1)",
        )
        .run();
    });
    const kinds = new Set((await bothWays(db)).findings.map((f) => f.kind));
    expect(kinds).toEqual(new Set(["projection-different", "projection-missing", "projection-extra"]));
  });

  it("a second outcome after the run ended is duplicate-outcome: the ended run's call records come back from the spill", async () => {
    const { db, version } = forge("completed", (runId) => ({
      type: "call.failed",
      runId,
      callId: `${runId}/0`,
      attempt: 1,
      definite: true,
      error: { name: "Error", message: "refused after all" },
    }));
    expect((await bothWays(db)).findings).toEqual([
      expect.objectContaining({ kind: "duplicate-outcome", streamId: stream("completed"), version }),
    ]);
  });

  it("an event after the run ended is transition-rejected in the state the run ended in", async () => {
    const { db, version } = forge("stop", (runId) => ({ type: "run.resumed", runId, by: "mallory" }));
    expect((await bothWays(db)).findings).toEqual([
      expect.objectContaining({
        kind: "transition-rejected",
        streamId: stream("stop"),
        version,
        detail: expect.stringContaining('state "stopped"'),
      }),
    ]);
  });

  it("a conflict.recorded after the run ended is accepted, as its machine accepts it", async () => {
    const { db } = forge("completed", (runId) => ({
      type: "conflict.recorded",
      runId,
      callId: `${runId}/0`,
      kind: "outcome",
      detail: "a late second outcome",
      recorded: { label: "completed-a", done: true },
      attempted: { label: "completed-a", done: false },
    }));
    expect((await bothWays(db)).findings).toEqual([]);
  });
});
