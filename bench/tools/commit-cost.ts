/**
 * What makes a journal commit cost more than the floor's: the pages it writes, or the work done
 * between commits. Times BEGIN IMMEDIATE … COMMIT (WAL, synchronous=FULL, as the journal and the
 * floor) four ways, alternating, and prints the medians per round and over all rounds:
 *
 *   npx tsx bench/tools/commit-cost.ts [rounds=8] [commits=300] [busyMicros=400]
 *
 * - floor: one 400-byte row, commits back to back (the bench's floor);
 * - journal-like: a row in a table with AUTOINCREMENT and a (stream, version) key, and an upsert
 *   of a WITHOUT ROWID row (the journal's pages, without its JavaScript);
 * - each again with `busyMicros` of JavaScript allocating between commits (as a runtime does).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { median } from "../lib/stats.js";

const rounds = Number(process.argv[2] ?? 8);
const commits = Number(process.argv[3] ?? 300);
const busyMicros = Number(process.argv[4] ?? 400);
if (
  ![rounds, commits, busyMicros].every((n) => Number.isSafeInteger(n) && n >= 0) ||
  rounds < 1 ||
  commits < 1
)
  throw new Error("usage: commit-cost.ts [rounds] [commits] [busyMicros]");

const folder = mkdtempSync(join(tmpdir(), "holdfast-commit-cost-"));
const db = new Database(join(folder, "cost.db"));
db.pragma("journal_mode = WAL");
db.pragma("synchronous = FULL");
db.exec(`CREATE TABLE floor (id INTEGER PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE events (position INTEGER PRIMARY KEY AUTOINCREMENT, stream_id TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL, UNIQUE (stream_id, version));
CREATE TABLE projections (name TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (name, key)) WITHOUT ROWID;`);
const row = "x".repeat(400);
const insertFloor = db.prepare("INSERT INTO floor (data) VALUES (?)");
const insertEvent = db.prepare("INSERT INTO events (stream_id, version, data) VALUES (?, ?, ?)");
const upsertRow = db.prepare(
  "INSERT INTO projections (name, key, value) VALUES ('runs', ?, ?) ON CONFLICT (name, key) DO UPDATE SET value = excluded.value",
);
let version = 0;
const floor = () => insertFloor.run(row);
const journalLike = () => {
  version += 1;
  insertEvent.run(`run-${version % 64}`, version, row);
  upsertRow.run(`r-${version % 64}`, row);
};

const garbage: unknown[] = [];
const busy = (micros: number) => {
  const end = process.hrtime.bigint() + BigInt(micros * 1000);
  for (let i = 0; process.hrtime.bigint() < end; i++) {
    garbage.push({ i, text: `${i}`.repeat(20) });
    if (garbage.length > 50_000) garbage.length = 0;
  }
};
const time = (body: () => void, between: number): number => {
  const samples: number[] = [];
  for (let i = 0; i < commits; i++) {
    if (between > 0) busy(between);
    const started = process.hrtime.bigint();
    db.exec("BEGIN IMMEDIATE");
    body();
    db.exec("COMMIT");
    samples.push(Number(process.hrtime.bigint() - started) / 1000);
  }
  return Math.round(median(samples));
};

const names = ["floor", "journal-like", `floor + ${busyMicros} µs JS`, `journal-like + ${busyMicros} µs JS`];
const all: number[][] = names.map(() => []);
try {
  for (let round = 0; round < rounds; round++) {
    const figures = [
      time(floor, 0),
      time(journalLike, 0),
      time(floor, busyMicros),
      time(journalLike, busyMicros),
    ];
    for (const [i, f] of figures.entries()) all[i]!.push(f);
    console.log(names.map((n, i) => `${n} ${figures[i]} µs`).join(" | "));
  }
  console.log(
    `median over ${rounds} rounds: ${names.map((n, i) => `${n} ${Math.round(median(all[i]!))} µs`).join(" | ")}`,
  );
} finally {
  db.close();
  rmSync(folder, { recursive: true, force: true });
}
