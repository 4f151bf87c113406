import { existsSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it, vi } from "vitest";
import { anchorPathOf, readAnchor, writeAnchor } from "../../src/adapters/stores/libsql/anchor.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { readOnlyUri } from "../../src/adapters/stores/libsql/readOnly.js";
import type { AnyEvent } from "../../src/events/index.js";
import { defineAgent, LostCommits, openReader, openRuntime } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import type { AppendResult, HeadAnchor } from "../../src/runtime/Journal.js";
import { tamper } from "../audit/tamper.js";
import { useTempDir } from "../support/tmp.js";
import { cli, copyJournalFiles, journalBytes } from "./files.js";

const tempDir = useTempDir();

const opened: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "libsql" };

const appendOne = (journal: LibsqlJournal): Promise<AppendResult> =>
  journal.append({ streamId: "system", expectedVersion: "any", events: [opened] });

const headOf = (result: AppendResult): HeadAnchor => {
  const last = result.recorded.at(-1)!;
  return { position: last.position, streamId: last.streamId, version: last.version, hash: last.hash };
};

/**
 * An open journal whose first events were checkpointed into the file and whose last `inWal`
 * commits live only in its WAL; copied (database, WAL, anchor) while it is open. Returns the copy
 * and the last committed event, which the copy's anchor names.
 */
const openJournalCopy = async (inWal = 4): Promise<{ db: string; head: HeadAnchor }> => {
  const dir = tempDir();
  const live = LibsqlJournal.open(join(dir, "journal.db"), { checkpointEveryMs: 600_000 });
  try {
    for (let i = 0; i < 3; i++) await appendOne(live);
    live.unsafeDatabase().pragma("wal_checkpoint(TRUNCATE)");
    let last: AppendResult | undefined;
    for (let i = 0; i < inWal; i++) last = await appendOne(live);
    const db = copyJournalFiles(join(dir, "journal.db"), tempDir());
    return { db, head: headOf(last!) };
  } finally {
    await live.close();
  }
};

const auditFindings = async (db: string) => {
  const reader = await openReader({ store: db });
  try {
    return await reader.audit();
  } finally {
    await reader.close();
  }
};

/** A journal with lost commits is reported by the audit and refused for writing, and the refusal changes nothing. */
const expectLost = async (db: string, head: HeadAnchor) => {
  const before = journalBytes(db);
  const report = await auditFindings(db);
  expect(report.findings).toContainEqual(
    expect.objectContaining({
      kind: "lost-commits",
      streamId: head.streamId,
      version: head.version,
      position: head.position,
    }),
  );
  expect(report.anchor).toMatchObject({ position: head.position, hash: head.hash, holds: false });
  expect(report.clean).toBe(false);
  let refused: unknown;
  try {
    LibsqlJournal.open(db);
  } catch (error) {
    refused = error;
  }
  expect(refused).toBeInstanceOf(LostCommits);
  expect(refused).toMatchObject({ anchorPosition: head.position, anchorHash: head.hash });
  expect((refused as LostCommits).journalLastPosition).toBeLessThan(head.position);
  await expect(openRuntime({ store: db })).rejects.toBeInstanceOf(LostCommits);
  expect(journalBytes(db)).toEqual(before);
  return refused as LostCommits;
};

describe("lost commits are findings, not a shorter clean journal", () => {
  it("a WAL cut at several offsets loses the last commits: reported by the audit, refused by LibsqlJournal.open and openRuntime", async () => {
    const { db: template, head } = await openJournalCopy();
    const walSize = statSync(`${template}-wal`).size;
    expect(walSize).toBeGreaterThan(4096);
    for (const offset of [0, 32, Math.floor(walSize / 2), walSize - 4096, walSize - 1]) {
      const db = copyJournalFiles(template, tempDir());
      truncateSync(`${db}-wal`, offset);
      const refused = await expectLost(db, head);
      expect(refused.detail).toContain(`the journal ends at position ${refused.journalLastPosition}`);
    }
  });

  it("a removed WAL is lost commits", async () => {
    const { db, head } = await openJournalCopy();
    rmSync(`${db}-wal`);
    await expectLost(db, head);
  });

  it("a WAL lost whole before any checkpoint leaves an empty database: lost commits at the anchor's position for writers, readers and holdfast audit, not 'not a holdfast journal'", async () => {
    const dir = tempDir();
    const live = LibsqlJournal.open(join(dir, "journal.db"), { checkpointEveryMs: 600_000 });
    let head: HeadAnchor | undefined;
    try {
      for (let i = 0; i < 3; i++) head = headOf(await appendOne(live));
      // The file as a copy without its WAL finds it: every commit is still in the WAL.
      const db = copyJournalFiles(join(dir, "journal.db"), tempDir());
      rmSync(`${db}-wal`);
      const before = journalBytes(db);
      const tables = new Database(readOnlyUri(db));
      expect(
        Number((tables.prepare("SELECT count(*) AS n FROM sqlite_schema").get() as { n: number }).n),
      ).toBe(0);
      tables.close();
      for (const open of [
        async () => LibsqlJournal.open(db),
        () => openRuntime({ store: db }),
        () => openReader({ store: db }),
      ]) {
        const refused = await open().then(
          () => null,
          (error: unknown) => error,
        );
        expect(refused).toBeInstanceOf(LostCommits);
        expect(refused).toMatchObject({ anchorPosition: head!.position, anchorHash: head!.hash });
      }
      const audit = await cli(["audit", "--db", db]);
      expect(audit.code).toBe(3);
      expect(audit.stderr).toContain("lost committed events");
      expect(audit.stderr).toContain(`position ${head!.position}`);
      expect(audit.stderr).not.toContain("not a holdfast journal");
      expect(journalBytes(db)).toEqual(before);
    } finally {
      await live.close();
    }
  });

  it("an emptied file is refused, never made a fresh journal, and its WAL is kept", async () => {
    const { db, head } = await openJournalCopy();
    truncateSync(db, 0);
    const wal = readFileSync(`${db}-wal`);
    let refused: unknown;
    try {
      LibsqlJournal.open(db);
    } catch (error) {
      refused = error;
    }
    expect(refused).toMatchObject({
      _tag: "LostCommits",
      anchorPosition: head.position,
      journalLastPosition: 0,
    });
    expect(statSync(db).size).toBe(0);
    expect(readFileSync(`${db}-wal`).equals(wal)).toBe(true);
    const audit = await cli(["audit", "--db", db]);
    expect(audit.code).toBe(3);
    expect(audit.stderr).toContain(`records events up to position ${head.position}`);
    const writer = await cli(["rebuild", "--db", db]);
    expect(writer.code).toBe(3);
    expect(writer.stderr).toContain("lost committed events");
    expect(readFileSync(`${db}-wal`).equals(wal)).toBe(true);
    // A removed file next to its anchor is refused the same way.
    rmSync(db);
    await expect(openRuntime({ store: db })).rejects.toMatchObject({ _tag: "LostCommits" });
    expect(existsSync(db)).toBe(false);
  });

  it("a file cut short is refused as damaged, naming what its anchor records; the audit says so (exit 3)", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const journal = LibsqlJournal.open(db);
    let head: HeadAnchor | undefined;
    for (let i = 0; i < 100; i++)
      head = headOf(
        await journal.append({
          streamId: "system",
          expectedVersion: "any",
          events: [opened, opened, opened],
        }),
      );
    await journal.close();
    const size = statSync(db).size;
    truncateSync(db, Math.floor(size / 2 / 4096) * 4096);
    const before = journalBytes(db);
    expect(() => LibsqlJournal.open(db)).toThrow(
      `the file is damaged (SQLITE_CORRUPT: database disk image is malformed), and its head anchor records events up to position ${head!.position}`,
    );
    const audit = await cli(["audit", "--db", db]);
    expect(audit.code).toBe(3);
    expect(audit.stderr).toContain("the file is damaged");
    expect(journalBytes(db)).toEqual(before);
  });

  it("deleted tail events are lost commits", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const journal = LibsqlJournal.open(db);
    let head: HeadAnchor | undefined;
    for (let i = 0; i < 5; i++) head = headOf(await appendOne(journal));
    await journal.close();
    tamper(db, (sql) => sql.prepare("DELETE FROM events WHERE position > ?").run(head!.position - 2));
    await expectLost(db, head!);
  });

  it("a clean close and reopen is not a finding, and leaves the whole journal in its file", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const first = LibsqlJournal.open(db);
    const head = headOf(await appendOne(first));
    await first.close();
    expect(statSync(`${db}-wal`).size).toBe(0);
    const again = LibsqlJournal.open(db);
    const next = headOf(await appendOne(again));
    await again.close();
    const report = await auditFindings(db);
    expect(report.findings).toEqual([]);
    expect(report.anchor).toMatchObject({ ...next, holds: true });
    expect(next.position).toBeGreaterThan(head.position);
  });

  it("a journal without an anchor (made by an older holdfast) gets one at its last event on its first open", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const journal = LibsqlJournal.open(db);
    const head = headOf(await appendOne(journal));
    await journal.close();
    rmSync(anchorPathOf(db));
    expect((await auditFindings(db)).anchor).toBeNull();
    await LibsqlJournal.open(db).close();
    expect(readAnchor(db)).toEqual({ kind: "anchored", anchor: head, path: anchorPathOf(db) });
    expect(statSync(anchorPathOf(db)).mode & 0o777).toBe(0o600);
  });

  it("the anchor follows every commit batch, from several journal objects on one file it may lag but never names a missing event", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const a = LibsqlJournal.open(db);
    const b = LibsqlJournal.open(db);
    try {
      for (let i = 0; i < 10; i++) {
        const head = headOf(await appendOne(i % 2 === 0 ? a : b));
        const reading = readAnchor(db);
        expect(reading.kind).toBe("anchored");
        if (reading.kind !== "anchored") continue;
        expect(reading.anchor.position).toBeLessThanOrEqual(head.position);
        const found = a
          .unsafeDatabase()
          .prepare("SELECT hash FROM events WHERE position = ?")
          .get(reading.anchor.position) as { hash: string };
        expect(found.hash).toBe(reading.anchor.hash);
      }
      const last = headOf(await appendOne(a));
      expect(readAnchor(db)).toMatchObject({ anchor: last });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("an event retention removed after the anchor named it is not a loss", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const echo = defineAgent({ name: "echo", version: "1", run: async (_turn, input: string) => input });
    const runtime = await openRuntime({ store: db, agents: [echo] });
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "echo", content: "hi" });
    expect((await handle.result).status).toBe("completed");
    await runtime.close();
    const journal = LibsqlJournal.open(db);
    const named = readAnchor(db);
    const pruned = await journal.prune({ keepRuns: 0, keepDays: 0 });
    await journal.close();
    expect(pruned.pruned.map((p) => p.runId)).toEqual([handle.runId]);
    expect(named).toMatchObject({ kind: "anchored", anchor: { streamId: `run-${handle.runId}` } });
    // As if the process died between the prune's COMMIT and its anchor write.
    if (named.kind === "anchored") writeAnchor(db, named.anchor);
    expect((await auditFindings(db)).findings).toEqual([]);
    await LibsqlJournal.open(db).close();
  });

  it("a torn anchor slot falls back to the other; an anchor with no whole record is refused until a person accepts the head", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const journal = LibsqlJournal.open(db);
    await appendOne(journal);
    const head = headOf(await appendOne(journal));
    await journal.close();
    const bytes = readFileSync(anchorPathOf(db));
    // The newest record is in the slot the last write went to; tear it.
    const torn = Buffer.from(bytes);
    const newest = torn.subarray(0, 4096).includes(Buffer.from(`"position":${head.position},`)) ? 0 : 4096;
    torn.write("x", newest + 40);
    writeFileSync(anchorPathOf(db), torn);
    const reading = readAnchor(db);
    expect(reading.kind).toBe("anchored");
    if (reading.kind === "anchored") expect(reading.anchor.position).toBeLessThan(head.position);
    await LibsqlJournal.open(db).close();

    writeFileSync(anchorPathOf(db), Buffer.alloc(8192, 7));
    expect(() => LibsqlJournal.open(db)).toThrow(/head anchor .* is damaged/);
    const audit = await cli(["audit", "--db", db]);
    expect(audit.code).toBe(1);
    expect(audit.stdout).toContain("anchor-damaged");
    const accepted = await cli(["audit", "--accept-head", "--db", db]);
    expect(accepted.code, accepted.stdout).toBe(0);
    expect(readAnchor(db)).toMatchObject({ kind: "anchored", anchor: head });
    await LibsqlJournal.open(db).close();
  });

  it("after a deliberate restore, `holdfast audit --accept-head` anchors the restored head; other findings keep the anchor", async () => {
    const made = join(tempDir(), "journal.db");
    const journal = LibsqlJournal.open(made);
    const restored = headOf(await appendOne(journal));
    const backup = join(tempDir(), "backup.db");
    journal.unsafeDatabase().prepare("VACUUM INTO ?").run(backup);
    await appendOne(journal);
    await journal.close();
    // Files no connection of this process has open, as after the journal's process exited.
    const db = copyJournalFiles(made, tempDir());
    // The restore: the backup copied over the journal, the WAL gone with it.
    writeFileSync(db, readFileSync(backup));
    rmSync(`${db}-wal`, { force: true });
    rmSync(`${db}-shm`, { force: true });

    const refused = await cli(["rebuild", "--db", db]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain("holdfast audit --accept-head");
    const audit = await cli(["audit", "--db", db]);
    expect(audit.code).toBe(1);
    expect(audit.stdout).toMatch(/lost-commits/);
    expect((await cli(["runs", "--db", db])).code).toBe(0);

    const damaged = copyJournalFiles(db, tempDir());
    tamper(damaged, (sql) => sql.prepare("UPDATE events SET data = '{}' WHERE position = 1").run());
    const notAccepted = await cli(["audit", "--accept-head", "--db", damaged]);
    expect(notAccepted.code).toBe(1);
    expect(notAccepted.stdout).toContain("the anchor was not changed");
    expect(readAnchor(damaged)).toEqual({ ...readAnchor(db), path: anchorPathOf(damaged) });

    const accepted = await cli(["audit", "--accept-head", "--db", db]);
    expect(accepted.code, accepted.stdout).toBe(0);
    expect(accepted.stdout).toContain("head anchor written");
    expect(readAnchor(db)).toMatchObject({ kind: "anchored", anchor: restored });
    expect((await cli(["audit", "--db", db])).code).toBe(0);
    const reopened = LibsqlJournal.open(db);
    await appendOne(reopened);
    await reopened.close();
    const database = new Database(`file:${db}?mode=ro`);
    expect((database.prepare("SELECT count(*) AS n FROM events").get() as { n: number }).n).toBe(2);
    database.close();
  });
  it("a journal put in place of another (same positions, other events) is lost commits, not a clean journal", async () => {
    const made = async () => {
      const journal = LibsqlJournal.open(join(tempDir(), "journal.db"));
      let head: HeadAnchor | undefined;
      for (let i = 0; i < 3; i++) head = headOf(await appendOne(journal));
      await journal.close();
      return { db: journal.location, head: head! };
    };
    const first = await made();
    const second = await made();
    const db = copyJournalFiles(second.db, tempDir());
    writeFileSync(anchorPathOf(db), readFileSync(anchorPathOf(first.db)));
    const report = await auditFindings(db);
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: "lost-commits", position: first.head.position }),
    ]);
    expect(report.findings[0]?.detail).toContain("the journal was replaced or rewritten");
    expect(() => LibsqlJournal.open(db)).toThrow(LostCommits);
  });

  it("while commits happen the WAL is copied into the file every checkpointEveryMs, not only at close", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const journal = LibsqlJournal.open(db, { checkpointEveryMs: 100 });
    try {
      for (let i = 0; i < 3; i++) await appendOne(journal);
      // The database file alone, without its WAL, holds the three events once a checkpoint ran.
      const inFileAlone = () => {
        const copy = join(tempDir(), "journal.db");
        writeFileSync(copy, readFileSync(db));
        const raw = new Database(`file:${copy}?mode=ro`);
        try {
          return (raw.prepare("SELECT count(*) AS n FROM events").get() as { n: number }).n;
        } catch {
          return 0;
        } finally {
          raw.close();
        }
      };
      await vi.waitFor(() => expect(inFileAlone()).toBe(3), { timeout: 10_000, interval: 50 });
    } finally {
      await journal.close();
    }
  });
});

describe("auditJournal against the anchor", () => {
  it("a journal whose anchor names a later position than the log holds reports it once, with the stream and version", async () => {
    const { db, head } = await openJournalCopy(1);
    rmSync(`${db}-wal`);
    const reader = LibsqlJournal.openReadOnly(db);
    try {
      const report = await auditJournal(reader);
      expect(report.findings.filter((f) => f.kind === "lost-commits")).toHaveLength(1);
      expect(report.lastEvent?.position).toBeLessThan(head.position);
    } finally {
      await reader.close();
    }
  });
});
