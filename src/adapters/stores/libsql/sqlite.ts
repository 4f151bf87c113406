import type Database from "libsql";

type Db = InstanceType<typeof Database>;

/** One PRAGMA's value. (The driver's `simple` option returns the row, not the value.) */
export const pragmaValue = (db: Db, pragma: string): unknown => {
  const row = (db.prepare(`PRAGMA ${pragma}`).all() as Array<Record<string, unknown>>)[0];
  return row ? Object.values(row)[0] : undefined;
};

/** The SQLite result code name the driver attached to an error (`SQLITE_BUSY`, …), or "". */
export const sqliteCode = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error
    ? String((error as { code: unknown }).code)
    : "";

/**
 * A driver error that says the file itself is damaged (`SQLITE_CORRUPT…`, `SQLITE_NOTADB`), as
 * the reason for a `JournalUnavailable`; null for any other error.
 */
export const damageOf = (error: unknown): string | null => {
  const code = sqliteCode(error);
  if (!code.startsWith("SQLITE_CORRUPT") && code !== "SQLITE_NOTADB") return null;
  return `the file is damaged (${code}: ${error instanceof Error ? error.message : String(error)})`;
};

/**
 * A driver error that says the storage below the file failed — the disk is full (`SQLITE_FULL`),
 * an I/O error (`SQLITE_IOERR…`, ENOSPC and EIO among them) — as the reason for a
 * `JournalUnavailable`; null for any other error. A full disk is definite (SQLite wrote no commit
 * record); an I/O error during a commit is not (the commit may be durable).
 */
export const storageFailureOf = (error: unknown): string | null => {
  const code = sqliteCode(error);
  const detail = `${code}: ${error instanceof Error ? error.message : String(error)}`;
  if (code === "SQLITE_FULL")
    return `the disk is full (${detail}): the write was refused and rolled back, nothing of it was committed`;
  if (code.startsWith("SQLITE_IOERR"))
    return `the storage failed (${detail}): whether the last write was committed is unknown until the journal is read again`;
  return null;
};

/** What to do about a storage failure, for the `hint` of a `JournalUnavailable`. */
export const STORAGE_HINT =
  'Free space on (or repair) the file system that holds the journal and its -wal file; holdfast refuses new work until then and goes on once writes succeed. Calls whose outcome could not be written stay in doubt: recovery holds their runs for a decision (docs/operations.md, "When the disk is full").';

/** What a journal file says of itself, read without changing anything. */
export interface FileIdentity {
  readonly userVersion: number;
  readonly applicationId: number;
  readonly tables: number;
}

/**
 * The schema version, application id and table count of an opened file. A file that is not a
 * database, or cannot be read, fails through `unavailable` (with `notDatabaseHint` for the first).
 */
export const fileIdentity = (
  db: Db,
  unavailable: (reason: string, hint: string) => Error,
  notDatabaseHint: string,
): FileIdentity => {
  try {
    // One statement, so one snapshot: read one by one, a second process creating the journal could
    // commit its first migration between them (application id 0, then tables), and this file would
    // look foreign. Seen in the cancel torture, where two processes open a new journal together.
    const row = db
      .prepare(
        "SELECT (SELECT user_version FROM pragma_user_version) AS v, (SELECT application_id FROM pragma_application_id) AS a, (SELECT count(*) FROM sqlite_schema WHERE type = 'table') AS n",
      )
      .get() as { v: number; a: number; n: number };
    return { userVersion: Number(row.v ?? 0), applicationId: Number(row.a ?? 0), tables: Number(row.n) };
  } catch (cause) {
    if (sqliteCode(cause) === "SQLITE_NOTADB")
      throw unavailable("the file is not a database", notDatabaseHint);
    // A damaged schema page is damage, as anywhere else in the file (where it falls depends on the
    // file's layout: one more table moves it).
    const damage = damageOf(cause);
    if (damage)
      throw unavailable(
        damage,
        "Keep the file as evidence; restore the journal with its -wal file from a copy or the latest backup (holdfast backup).",
      );
    // A first read may need room: rebuilding a missing -shm index of the WAL grows that file.
    const storage = storageFailureOf(cause);
    if (storage) throw unavailable(storage, STORAGE_HINT);
    throw unavailable(
      `cannot be read (${sqliteCode(cause) || String(cause)})`,
      "Check the file and its permissions.",
    );
  }
};

/** The journal's fingerprint key from its `meta` table; a journal without one fails through `unavailable`. */
export const storedFingerprintKey = (
  db: Db,
  unavailable: (reason: string, hint: string) => Error,
): Uint8Array => {
  const row = db.prepare("SELECT value FROM meta WHERE key = 'fingerprint_key'").get() as
    | { value: string }
    | undefined;
  if (!row)
    throw unavailable(
      "the fingerprint key is missing",
      "The journal was changed outside holdfast; restore a backup.",
    );
  return Uint8Array.from(Buffer.from(row.value, "hex"));
};
