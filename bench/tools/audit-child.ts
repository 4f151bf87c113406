import { readFileSync } from "node:fs";
import { auditStore } from "../../src/adapters/auditStore.js";
import { auditInBoundedHeap } from "../../src/adapters/boundedAudit.js";
import { openStoreReader } from "../../src/adapters/store.js";

/**
 * `node --import tsx bench/tools/audit-child.ts <journal> [bounded|in-process]`: audit one journal
 * in a process of its own, so that the peak resident set size it reports is the audit's, not the
 * bench's. `bounded` (the default) audits
 * as `holdfast audit` does (a long log in a worker thread with a capped heap); `in-process` as a
 * library call of `auditStore` does. Prints one JSON object on stdout.
 */
const path = process.argv[2];
const mode = process.argv[3] ?? "bounded";
if (!path || (mode !== "bounded" && mode !== "in-process"))
  throw new Error("usage: audit-child.ts <journal file> [bounded|in-process]");
/**
 * The process's own peak resident set size in KiB. On Linux `VmHWM`: `maxRSS`
 * (`getrusage`) starts from the parent's resident set when the child was forked, so a child of a
 * large bench process reported the bench's size, not its own.
 */
const peakRssKiB = (): number => {
  try {
    const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
    if (hwm) return Number(hwm[1]);
  } catch {
    // Not Linux: getrusage's figure.
  }
  return process.resourceUsage().maxRSS;
};
const startRssKiB = peakRssKiB();
// Read-only, as `holdfast audit` opens it.
const journal = await openStoreReader(path);
try {
  const started = performance.now();
  let heapMib: number | null = null;
  let fallback: string | null = null;
  const report =
    mode === "bounded"
      ? await auditInBoundedHeap(path, journal, {
          maxFindings: 20,
          onWorker: (heap) => {
            heapMib = heap;
          },
          onFallback: (why) => {
            fallback = why;
          },
        })
      : await auditStore(journal, { maxFindings: 20 });
  const seconds = (performance.now() - started) / 1000;
  const kinds = [...new Set(report.findings.map((f) => f.kind))];
  process.stdout.write(
    `${JSON.stringify({
      events: report.events,
      seconds,
      clean: report.clean,
      findings: report.findings.length + report.findingsOmitted,
      kinds,
      heapMib,
      fallback,
      startRssKiB,
      maxRssKiB: peakRssKiB(),
    })}\n`,
  );
} finally {
  await journal.close();
}
