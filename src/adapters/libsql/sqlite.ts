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
