import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { auditStore } from "../../src/adapters/auditStore.js";
import {
  auditInBoundedHeap,
  boundedHeapMib,
  lastPositionOf,
  WORKER_CACHE_KIB,
} from "../../src/adapters/boundedAudit.js";
import { openStoreReader } from "../../src/adapters/store.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { AuditReport } from "../../src/runtime/audit.js";
import { useTempDir } from "../support/tmp.js";
import { givenJournal } from "./given.js";

const tempDir = useTempDir();

/** What `holdfast audit` is told along the way. */
const watched = () => {
  const told = { worker: [] as number[], fallback: [] as string[], progress: [] as number[] };
  return {
    told,
    options: {
      progressEvery: 10,
      onWorker: (heap: number) => told.worker.push(heap),
      onFallback: (why: string) => told.fallback.push(why),
      onProgress: (events: number) => told.progress.push(events),
    },
  };
};

const inProcess = async (db: string, options: Parameters<typeof auditStore>[1] = {}) => {
  const progress: number[] = [];
  const reader = await openStoreReader(db);
  try {
    const report = await auditStore(reader, {
      ...options,
      progressEvery: 10,
      onProgress: (events) => progress.push(events),
    });
    return { report, progress };
  } finally {
    await reader.close();
  }
};

const bounded = async (
  db: string,
  options: Parameters<typeof auditInBoundedHeap>[2],
): Promise<AuditReport> => {
  const reader = await openStoreReader(db);
  try {
    return await auditInBoundedHeap(db, reader, options);
  } finally {
    await reader.close();
  }
};

describe("holdfast audit in a worker thread with a capped heap", () => {
  it("a long log is audited in a worker: the same report, findings and progress as in this process", async () => {
    const { db } = await givenJournal(tempDir());
    // A head digest that differs: the report then carries a finding, cloned across the thread.
    const expectHead = { digest: "0".repeat(64), position: null };
    const expected = await inProcess(db, { expectHead });
    expect(expected.report.clean).toBe(false);
    const { told, options } = watched();
    const report = await bounded(db, { ...options, expectHead, inProcessUpTo: 0 });
    expect(told.fallback).toEqual([]);
    expect(told.worker).toEqual([boundedHeapMib(expected.report.lastPosition)]);
    expect(report).toEqual(expected.report);
    expect(told.progress).toEqual(expected.progress);
    expect(told.progress.length).toBeGreaterThan(0);
  });

  it("a worker that runs out of its heap is tried once more with twice the heap, and says so", async () => {
    const { db } = await givenJournal(tempDir());
    const expected = await inProcess(db);
    const { told, options } = watched();
    // 20 MiB does not hold the worker's modules (from the sources, with tsx); 40 does.
    const report = await bounded(db, { ...options, inProcessUpTo: 0, heapMib: 20 });
    expect(told.worker).toEqual([20, 40]);
    expect(told.fallback).toEqual([
      "the audit worker ran out of its 20 MiB heap; audited again in a worker with 40 MiB",
    ]);
    expect(report).toEqual(expected.report);
  });

  it("a worker that runs out of twice its heap too: the audit runs in this process instead and says why", async () => {
    const { db } = await givenJournal(tempDir());
    const expected = await inProcess(db);
    const { told, options } = watched();
    const report = await bounded(db, { ...options, inProcessUpTo: 0, heapMib: 2 });
    expect(told.worker).toEqual([2, 4]);
    expect(told.fallback).toEqual([
      "the audit worker ran out of its 2 MiB heap; audited again in a worker with 4 MiB",
      "the audit worker ran out of its 4 MiB heap; audited again in this process, without a heap cap",
    ]);
    expect(report).toEqual(expected.report);
  });

  it("a short log is audited in this process, with no worker", async () => {
    const { db } = await givenJournal(tempDir());
    const expected = await inProcess(db);
    const { told, options } = watched();
    const report = await bounded(db, { ...options, inProcessUpTo: expected.report.lastPosition });
    expect(told.worker).toEqual([]);
    expect(told.fallback).toEqual([]);
    expect(report).toEqual(expected.report);
  });

  it("the log's last position is found with point reads: an empty log, a short one, one past the first probe", async () => {
    const empty = join(tempDir(), "empty.db");
    await LibsqlJournal.open(empty).close();
    const reader = await openStoreReader(empty);
    expect(await lastPositionOf(reader)).toBe(0);
    await reader.close();

    const { db } = await givenJournal(tempDir());
    const expected = await inProcess(db);
    const given = await openStoreReader(db);
    expect(await lastPositionOf(given)).toBe(expected.report.lastPosition);
    await given.close();

    // 1,500 events: past the first probe (1,024), so the doubling and the halving both run.
    const long = join(tempDir(), "long.db");
    const journal = LibsqlJournal.open(long);
    let version = 0;
    for (let batch = 0; batch < 15; batch++) {
      await journal.append({
        streamId: "system",
        expectedVersion: version === 0 ? "any" : version,
        events: Array.from({ length: 100 }, () => ({
          type: "journal.opened" as const,
          schemaVersion: 1,
          engine: "libsql",
        })),
      });
      version += 100;
    }
    await journal.close();
    const longReader = await openStoreReader(long);
    expect(await lastPositionOf(longReader)).toBe(1500);
    await longReader.close();
  });

  it("the worker's reader opens with its own, smaller page cache; other readers keep the writer's", async () => {
    const { db } = await givenJournal(tempDir());
    const cacheOf = (reader: unknown): unknown => {
      const row = (reader as { db: { prepare(sql: string): { get(): unknown } } }).db
        .prepare("PRAGMA cache_size")
        .get() as { cache_size: number };
      return row.cache_size;
    };
    const small = LibsqlJournal.openReadOnly(db, { cacheKib: WORKER_CACHE_KIB });
    const usual = LibsqlJournal.openReadOnly(db);
    try {
      expect(cacheOf(small)).toBe(-WORKER_CACHE_KIB);
      expect(cacheOf(usual)).toBe(-32 * 1024);
    } finally {
      await small.close();
      await usual.close();
    }
  });
});
