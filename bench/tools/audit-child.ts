import { auditStore } from "../../src/adapters/auditStore.js";
import { LibsqlJournal } from "../../src/adapters/libsql/LibsqlJournal.js";

/**
 * `node --import tsx bench/tools/audit-child.ts <journal>`: audit one journal in a process of its
 * own, so that the peak resident set size it reports (`process.resourceUsage().maxRSS`) is the
 * audit's, not the bench's. Prints one JSON object on stdout.
 */
const path = process.argv[2];
if (!path) throw new Error("usage: audit-child.ts <journal file>");
const startRssKiB = process.resourceUsage().maxRSS;
const journal = LibsqlJournal.open(path);
try {
  const started = performance.now();
  const report = await auditStore(journal, { maxFindings: 20 });
  const seconds = (performance.now() - started) / 1000;
  const kinds = [...new Set(report.findings.map((f) => f.kind))];
  process.stdout.write(
    `${JSON.stringify({
      events: report.events,
      seconds,
      clean: report.clean,
      findings: report.findings.length + report.findingsOmitted,
      kinds,
      startRssKiB,
      maxRssKiB: process.resourceUsage().maxRSS,
    })}\n`,
  );
} finally {
  await journal.close();
}
