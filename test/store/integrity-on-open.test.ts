import { closeSync, openSync, utimesSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/**
 * A journal whose `claims` table (read by nothing at open) has a broken B-tree page: only a
 * whole-file check finds it before something reads that table.
 */
const journalWithABrokenPage = async (): Promise<string> => {
  const path = join(tempDir(), "journal.db");
  const journal = LibsqlJournal.open(path);
  await journal.append({
    streamId: "system",
    expectedVersion: "no-stream",
    events: [{ type: "journal.opened", schemaVersion: 1, engine: "libsql" }],
  });
  await journal.close();
  const db = new Database(path);
  db.pragma("wal_checkpoint(TRUNCATE)");
  const roots = db.prepare("SELECT rootpage FROM sqlite_schema WHERE tbl_name = 'claims'").all() as Array<{
    rootpage: number;
  }>;
  const pageSize = Number((db.prepare("PRAGMA page_size").get() as { page_size: number }).page_size);
  db.close();
  const fd = openSync(path, "r+");
  // Byte 0 of a B-tree page is its type (2, 5, 10 or 13); 0xff is none of them. The table and its
  // primary-key index both, so a look-up by key meets it.
  for (const { rootpage } of roots)
    writeSync(fd, Buffer.from([0xff, 0xff, 0xff, 0xff]), 0, 4, (rootpage - 1) * pageSize);
  closeSync(fd);
  return path;
};

/** The WAL as a process of this boot leaves it (written now), or as a machine crash leaves it. */
const setWalWritten = (path: string, when: "this boot" | "before this boot"): void => {
  const wal = `${path}-wal`;
  writeFileSync(wal, "", { flag: "a" });
  const seconds = when === "this boot" ? Date.now() / 1000 : Date.UTC(2001, 0, 1) / 1000;
  utimesSync(wal, seconds, seconds);
};

describe("integrity check on open", () => {
  it("a journal whose WAL was last written before the machine started is checked whole, and a broken page refuses the open", async () => {
    const path = await journalWithABrokenPage();
    setWalWritten(path, "before this boot");
    expect(() => LibsqlJournal.open(path)).toThrow(/integrity check failed/);
  });

  it("a journal left by a process of this boot opens without reading the whole file; a broken page surfaces when it is read", async () => {
    const path = await journalWithABrokenPage();
    setWalWritten(path, "this boot");
    const journal = LibsqlJournal.open(path);
    try {
      await expect(journal.currentClaim("any")).rejects.toThrow(/malformed|corrupt/i);
    } finally {
      await journal.close();
    }
  });
});
