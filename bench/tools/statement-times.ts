/**
 * Where the libSQL journal's time goes at the runtime's level: every statement's time, by its SQL,
 * while `runs` bench runs of `calls` no-op calls each run together.
 *
 *   npx tsx bench/tools/statement-times.ts [runs=64] [calls=50]
 *
 * Prints the CPU time per journaled event, then the statements by total time: how many ran, µs per
 * event and µs each. `BEGIN`/`COMMIT` include the fsync. Run it from a clone, on a quiet machine.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { measuredRuns, openBenchRuntime } from "../lib/runtime.js";

const runs = Number(process.argv[2] ?? 64);
const calls = Number(process.argv[3] ?? 50);
if (!Number.isSafeInteger(runs) || runs < 1 || !Number.isSafeInteger(calls) || calls < 1)
  throw new Error("usage: statement-times.ts [runs] [calls]");

interface Timed {
  n: number;
  ns: bigint;
}
const times = new Map<string, Timed>();
let measuring = false;
const note = (key: string, started: bigint): void => {
  if (!measuring) return;
  const entry = times.get(key) ?? { n: 0, ns: 0n };
  entry.n += 1;
  entry.ns += process.hrtime.bigint() - started;
  times.set(key, entry);
};

// Wrap the driver the journal uses: each prepared statement's get/run/all, and exec.
const Database = createRequire(import.meta.url)("libsql");
const prepare = Database.prototype.prepare;
Database.prototype.prepare = function (this: unknown, sql: string, ...rest: unknown[]) {
  const statement = prepare.call(this, sql, ...rest);
  for (const method of ["get", "run", "all"]) {
    const original = statement[method];
    statement[method] = function (this: unknown, ...args: unknown[]) {
      const started = process.hrtime.bigint();
      try {
        return original.apply(this, args);
      } finally {
        note(`${method} ${sql.replace(/\s+/g, " ").slice(0, 90)}`, started);
      }
    };
  }
  return statement;
};
const exec = Database.prototype.exec;
Database.prototype.exec = function (this: unknown, sql: string) {
  const started = process.hrtime.bigint();
  try {
    return exec.call(this, sql);
  } finally {
    note(`exec ${sql.slice(0, 60)}`, started);
  }
};

const folder = mkdtempSync(join(tmpdir(), "holdfast-statements-"));
const runtime = await openBenchRuntime(folder);
try {
  const { events, wallMs, cpuMicros } = await measuredRuns(runtime, runs, calls, (on) => {
    measuring = on;
  });
  const wall = Math.round(wallMs);
  let total = 0n;
  for (const entry of times.values()) total += entry.ns;
  const perEvent = (ns: bigint) => (Number(ns) / 1000 / events).toFixed(1);
  console.log(
    `${runs} runs × ${calls} calls: ${events} events in ${wall} ms (${Math.round(events / (wall / 1000))} events/s), ` +
      `${Math.round(cpuMicros / events)} µs CPU per event; statements ${perEvent(total)} µs per event`,
  );
  for (const [sql, entry] of [...times].sort((a, b) => Number(b[1].ns - a[1].ns)).slice(0, 20))
    console.log(
      `${String(entry.n).padStart(7)} ${perEvent(entry.ns).padStart(7)} µs/event ${(Number(entry.ns) / 1000 / entry.n).toFixed(1).padStart(8)} µs each  ${sql}`,
    );
} finally {
  await runtime.close();
  rmSync(folder, { recursive: true, force: true });
}
