/**
 * Which B-trees a journal append writes to the WAL: runs the bench's intent/outcome appends with
 * checkpoints paused, then maps every WAL frame's page to its table or index (`dbstat`).
 *
 *   npx tsx bench/tools/wal-pages.ts
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { benchStreams } from "../fixtures.js";

const dir = mkdtempSync(join(tmpdir(), "walpages-"));
const path = join(dir, "j.db");
const journal = LibsqlJournal.open(path);
try {
  const db = journal.unsafeDatabase();
  // warm: several runs
  for (let r = 0; r < 3; r++) {
    const s = benchStreams(journal.fingerprintKey, `warm-${r}`, 50);
    let v = 0;
    for (const events of s.appends) {
      await journal.append({ streamId: s.streamId, expectedVersion: v || "no-stream", events });
      v += events.length;
    }
  }
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.pragma("wal_autocheckpoint = 0");
  const s = benchStreams(journal.fingerprintKey, "measured", 50);
  let v = 0;
  let n = 0;
  for (const events of s.appends) {
    await journal.append({ streamId: s.streamId, expectedVersion: v || "no-stream", events });
    v += events.length;
    n++;
  }
  const wal = readFileSync(`${path}-wal`);
  const pageSize = wal.readUInt32BE(8);
  const pages: number[] = [];
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) pages.push(wal.readUInt32BE(at));
  const owner = new Map<number, string>();
  try {
    for (const row of db.prepare("SELECT name, pageno FROM dbstat").all() as Array<{
      name: string;
      pageno: number;
    }>)
      owner.set(row.pageno, row.name);
  } catch (e) {
    console.log("no dbstat", String(e));
  }
  const counts = new Map<string, number>();
  for (const p of pages) {
    const k = owner.get(p) ?? (p === 1 ? "page1(header)" : `page${p}`);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  console.log(`commits ${n}, frames ${pages.length}, per commit ${(pages.length / n).toFixed(2)}`);
  console.log(
    [...counts]
      .sort((a, b) => b[1] - a[1])
      .map(([k, c]) => `${k}: ${(c / n).toFixed(2)}`)
      .join("\n"),
  );
} finally {
  journal.close();
  rmSync(dir, { recursive: true, force: true });
}
