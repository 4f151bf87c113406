import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  APPLICATION_ID,
  LATEST_SCHEMA_VERSION,
  MIGRATIONS,
} from "../../src/adapters/stores/libsql/migrations.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const opened = (n: number) => ({
  streamId: "system",
  expectedVersion: n === 0 ? ("no-stream" as const) : n,
  events: [{ type: "journal.opened" as const, schemaVersion: 1, engine: "libsql" }],
});

/**
 * A journal at schema version 1 holding real events: written by today's journal, then copied row
 * by row into a file made by migration 1 alone, whose AUTOINCREMENT sequence is set past the last
 * event as if retention had removed the newest ones.
 */
const versionOneJournal = async (sequence: number): Promise<{ path: string; rows: unknown[] }> => {
  const dir = tempDir();
  const source = join(dir, "source.db");
  const journal = LibsqlJournal.open(source);
  for (let n = 0; n < 5; n++) await journal.append(opened(n));
  await journal.close();

  const path = join(dir, "v1.db");
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.exec(MIGRATIONS[0]!.sql);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.exec(`ATTACH DATABASE '${source}' AS source`);
  db.exec("INSERT INTO meta SELECT * FROM source.meta");
  db.exec("INSERT INTO events SELECT * FROM source.events ORDER BY position");
  db.exec(
    "INSERT INTO projections (name, key, value, position) SELECT name, key, value, position FROM source.projections",
  );
  db.exec("DETACH DATABASE source");
  db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'").run(sequence);
  db.pragma("user_version = 1");
  const rows = db.prepare("SELECT * FROM events ORDER BY position").all();
  db.close();
  return { path, rows };
};

describe("migration 2: fewer pages per commit", () => {
  it("a version 1 journal upgrades with every event, position and hash unchanged", async () => {
    const { path, rows } = await versionOneJournal(5);
    const journal = LibsqlJournal.open(path);
    try {
      const db = journal.unsafeDatabase();
      expect((db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(
        LATEST_SCHEMA_VERSION,
      );
      expect(db.prepare("SELECT * FROM events ORDER BY position").all()).toEqual(rows);
      expect((await journal.readAll({ after: 0, limit: 100 })).map((e) => e.version)).toEqual([
        1, 2, 3, 4, 5,
      ]);
    } finally {
      await journal.close();
    }
  });

  it("positions are never reused after the upgrade: the sequence survives the copy", async () => {
    const { path } = await versionOneJournal(40);
    const journal = LibsqlJournal.open(path);
    try {
      const { recorded } = await journal.append(opened(5));
      expect(recorded[0]!.position).toBe(41);
    } finally {
      await journal.close();
    }
  });

  it("the upgraded events table still refuses UPDATE and DELETE", async () => {
    const { path } = await versionOneJournal(5);
    const journal = LibsqlJournal.open(path);
    try {
      const db = journal.unsafeDatabase();
      expect(() => db.exec("UPDATE events SET data = '{}' WHERE position = 1")).toThrow(/immutable/);
      expect(() => db.exec("DELETE FROM events WHERE position = 1")).toThrow(/never deleted/);
    } finally {
      await journal.close();
    }
  });

  it("projections are one B-tree (WITHOUT ROWID) and event ids have no index of their own", () => {
    const journal = LibsqlJournal.open(join(tempDir(), "new.db"));
    try {
      const db = journal.unsafeDatabase();
      const sql = (name: string) =>
        (db.prepare("SELECT sql FROM sqlite_schema WHERE name = ?").get(name) as { sql: string }).sql;
      expect(sql("projections")).toMatch(/WITHOUT ROWID/);
      expect(sql("events")).not.toMatch(/event_id\s+TEXT\s+NOT NULL UNIQUE/);
      const indexes = db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'events'")
        .all();
      expect(indexes).toHaveLength(1);
    } finally {
      void journal.close();
    }
  });
});
