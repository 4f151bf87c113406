import { parentPort, workerData } from "node:worker_threads";
import { auditStore } from "./auditStore.js";
import { WORKER_CACHE_KIB, type WorkerAudit } from "./boundedAudit.js";
import { openStoreReader } from "./store.js";

/**
 * The worker {@link auditInBoundedHeap} starts: opens the journal read-only, as the command did,
 * audits it with the spill, and posts progress and then the report. An error ends the worker, and
 * the caller audits in its own process instead.
 */
const { store, options } = workerData as WorkerAudit;
const port = parentPort;
if (!port) throw new Error("auditWorker runs as a worker thread started by auditInBoundedHeap");
// The caller's own open checked the payload keys already. The log is read once, end to end: a
// small page cache (the pages stay in the system's file cache) keeps the process's memory down.
const journal = await openStoreReader(store, {
  libsql: { keyCheck: false, cacheKib: WORKER_CACHE_KIB },
  postgres: { keyCheck: false },
});
try {
  const report = await auditStore(journal, {
    ...options,
    onProgress: (events) => port.postMessage({ kind: "progress", events }),
  });
  port.postMessage({ kind: "report", report });
} finally {
  await journal.close();
}
