import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { uptime } from "node:os";
import type Database from "libsql";
import { JournalTooNew, JournalUnavailable } from "../../../runtime/errors.js";
import { APPLICATION_ID, LATEST_SCHEMA_VERSION, MIGRATIONS } from "./migrations.js";
import type { LibsqlJournalOptions } from "./options.js";
import { fileIdentity, pragmaValue, sqliteCode, storedFingerprintKey } from "./sqlite.js";

type Db = InstanceType<typeof Database>;

/** SQLite's page cache per connection, in KiB. */
export const CACHE_KIB = 32 * 1024;

/**
 * Whether the journal was open when this machine last went down: its WAL (kept by every writer,
 * removed only by a checkpointing close) was last written before the machine started. A WAL from a
 * process of this boot, dead or alive, proves nothing of the kind: the kernel kept its writes.
 */
const wentDownWithTheMachine = (location: string): boolean => {
  let written: number;
  try {
    written = statSync(`${location}-wal`).mtimeMs;
  } catch {
    return false;
  }
  // Two seconds of slack for the coarse boot time: in doubt, check.
  return written < Date.now() - uptime() * 1000 + 2000;
};

/** `PRAGMA quick_check`: every page and record of every B-tree, without matching indexes to rows. */
const integrityProblems = (db: Db): string[] => {
  try {
    return (db.prepare("PRAGMA quick_check").all() as Array<Record<string, unknown>>)
      .map((row) => String(Object.values(row)[0]))
      .filter((v) => v !== "ok");
  } catch (error) {
    // Some damage stops the check itself.
    if (sqliteCode(error).startsWith("SQLITE_CORRUPT")) return [String((error as Error).message)];
    throw error;
  }
};

/**
 * Check a freshly opened journal file (not a foreign or newer file), set the connection up (WAL,
 * `synchronous=FULL`, page cache), run the whole-file check after a machine crash, apply the
 * migrations, and return the fingerprint key.
 */
export const prepareJournalFile = (db: Db, location: string, options: LibsqlJournalOptions): Uint8Array => {
  const unavailable = (reason: string, hint: string) => new JournalUnavailable({ location, reason, hint });
  // Before anything reads the file: whether its WAL was last written before this machine started.
  const check = wentDownWithTheMachine(location);
  // Read-only look first: a newer or foreign file must not be changed at all.
  const { userVersion, applicationId, tables } = fileIdentity(
    db,
    unavailable,
    "Point --db at a holdfast journal, or at a path that does not exist yet.",
  );
  if (tables > 0 && applicationId !== APPLICATION_ID) {
    throw unavailable(
      "the file is a database but not a holdfast journal",
      "Point --db at a holdfast journal, or at a path that does not exist yet.",
    );
  }
  if (userVersion > LATEST_SCHEMA_VERSION) {
    throw new JournalTooNew({ location, found: userVersion, supported: LATEST_SCHEMA_VERSION });
  }

  const busy = options.busyTimeoutMs ?? 5000;
  db.pragma(`busy_timeout = ${Math.max(5000, busy)}`);
  const modeName = pragmaValue(db, "journal_mode = WAL");
  if (String(modeName).toLowerCase() !== "wal") {
    throw unavailable(`WAL mode could not be enabled (got ${String(modeName)})`, "Use a local file system.");
  }
  db.pragma("synchronous = FULL");
  db.pragma("foreign_keys = ON");
  db.pragma("secure_delete = ON");
  // The B-trees' upper levels stay cached as the log grows (the default is 2 MB).
  db.pragma(`cache_size = -${CACHE_KIB}`);

  // A crashed process cannot corrupt a WAL journal with synchronous=FULL; a machine that went down
  // with the journal open might have, on storage that acknowledges writes it has not made. So the
  // whole-file check runs then, not on every open: it reads the whole file, which made opening
  // grow with the log (docs/decisions/0008-integrity-check-after-a-machine-crash.md).
  const problems = check ? integrityProblems(db) : [];
  if (problems.length > 0) {
    throw unavailable(
      `integrity check failed: ${problems.slice(0, 3).join("; ")}`,
      "Restore the latest backup (holdfast backup) and run holdfast audit; do not write to this file.",
    );
  }

  // Migrations, each in its own write transaction; a second process racing here waits on the lock.
  for (const migration of MIGRATIONS) {
    db.exec("BEGIN IMMEDIATE");
    try {
      const current = Number(pragmaValue(db, "user_version") ?? 0);
      if (current >= migration.id) {
        db.exec("ROLLBACK");
        continue;
      }
      db.exec(migration.sql);
      if (migration.id === 1) {
        db.pragma(`application_id = ${APPLICATION_ID}`);
        db.prepare("INSERT INTO meta (key, value) VALUES ('fingerprint_key', ?)").run(
          randomBytes(32).toString("hex"),
        );
        db.prepare("INSERT INTO meta (key, value) VALUES ('created_at', ?)").run(new Date().toISOString());
      }
      db.pragma(`user_version = ${migration.id}`);
      db.exec("COMMIT");
    } catch (error) {
      if (db.inTransaction) db.exec("ROLLBACK");
      throw error;
    }
  }
  return storedFingerprintKey(db, unavailable);
};
