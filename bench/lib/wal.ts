import { statSync } from "node:fs";
import type Database from "libsql";

type Db = InstanceType<typeof Database>;

/** WAL file header and per-frame header sizes (SQLite file format, "WAL file format"). */
const WAL_HEADER = 32;
const FRAME_HEADER = 24;

/**
 * Pages written to the WAL per commit while `commits` runs: what each durable commit costs in I/O
 * besides its fsync. Checkpoints are paused meanwhile so the WAL only grows, then resumed.
 */
export const walPagesPerCommit = async (
  db: Db,
  walPath: string,
  commitCount: number,
  commits: () => Promise<void> | void,
): Promise<number> => {
  // This driver's `simple` option returns the row, not the value.
  const row = (db.prepare("PRAGMA page_size").all() as Array<Record<string, unknown>>)[0] ?? {};
  const pageSize = Number(Object.values(row)[0]);
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.pragma("wal_autocheckpoint = 0");
  try {
    await commits();
    const frames = (statSync(walPath).size - WAL_HEADER) / (pageSize + FRAME_HEADER);
    return frames / commitCount;
  } finally {
    db.pragma("wal_autocheckpoint = 1000");
    db.pragma("wal_checkpoint(TRUNCATE)");
  }
};
