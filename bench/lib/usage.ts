import { readFileSync } from "node:fs";

/**
 * CPU time and bytes passed through read/write system calls since a mark. Under a noisy
 * neighbour wall time swings, but CPU time and I/O volume show whether the work itself grew:
 * SQLite reads pages it does not hold in its cache with pread, so `readMiB` counts its cache
 * misses, and `writtenMiB` counts WAL and checkpoint writes.
 */
export interface Usage {
  readonly cpuMs: number;
  /** Null where /proc/self/io is not available (not Linux). */
  readonly readMiB: number | null;
  readonly writtenMiB: number | null;
}

const io = (): { read: number; written: number } | null => {
  try {
    const text = readFileSync("/proc/self/io", "utf8");
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, "m").exec(text)?.[1] ?? Number.NaN);
    return { read: field("rchar"), written: field("wchar") };
  } catch {
    return null;
  }
};

export const usageMark = (): (() => Usage) => {
  const cpu = process.cpuUsage();
  const before = io();
  return () => {
    const spent = process.cpuUsage(cpu);
    const after = io();
    const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;
    return {
      cpuMs: (spent.user + spent.system) / 1000,
      readMiB: before && after ? mib(after.read - before.read) : null,
      writtenMiB: before && after ? mib(after.written - before.written) : null,
    };
  };
};
