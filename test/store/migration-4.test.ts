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

/** A journal file at schema version 3 whose projections table holds a run's row and its calls' rows. */
const versionThreeJournal = (): string => {
  const path = join(tempDir(), "v3.db");
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  for (const migration of MIGRATIONS.slice(0, 3)) db.exec(migration.sql);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.prepare("INSERT INTO meta (key, value) VALUES ('fingerprint_key', ?)").run("ab".repeat(32));
  const row = db.prepare("INSERT INTO projections (name, key, value, position) VALUES (?, ?, ?, ?)");
  row.run("runs", "r1", JSON.stringify({ runId: "r1", status: "running" }), 2);
  row.run("calls", "r1/0", JSON.stringify({ callId: "r1/0", status: "completed" }), 2);
  row.run("calls", "r1/1", JSON.stringify({ callId: "r1/1", status: "in-doubt" }), 3);
  db.pragma("user_version = 3");
  db.close();
  return path;
};

describe("migration 4: calls folded on read", () => {
  it("a version 3 journal upgrades: its stored calls rows are gone, every other projection row stays", async () => {
    const journal = LibsqlJournal.open(versionThreeJournal());
    try {
      const db = journal.unsafeDatabase();
      expect((db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(
        LATEST_SCHEMA_VERSION,
      );
      expect(LATEST_SCHEMA_VERSION).toBeGreaterThanOrEqual(4);
      expect(await journal.projectionRows("calls")).toEqual([]);
      expect(await journal.projection("runs", "r1")).toEqual({ runId: "r1", status: "running" });
    } finally {
      await journal.close();
    }
  });
});
