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
