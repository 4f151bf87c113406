/**
 * `holdfast/audit` — verify a journal from your own code: every hash chain, every run folded
 * through its machine, the laws across events, the projections rebuilt and compared, the head
 * digest. Reads only; never repairs. (`holdfast audit` and `reader.audit()` run the same.)
 *
 * @example
 * import { auditJournal, openStoreReader, parseExpectedHead, temporarySpill } from "holdfast/audit";
 *
 * const journal = await openStoreReader("/evidence/journal.db");
 * try {
 *   const report = await auditJournal(journal, {
 *     expectHead: parseExpectedHead(process.env.ANCHORED_HEAD ?? ""),
 *     spill: () => temporarySpill(),
 *   });
 *   if (!report.clean) for (const f of report.findings) console.error(f.kind, f.streamId, f.version, f.detail);
 *   console.log(`${report.headDigest}@${report.lastPosition}`);
 * } finally {
 *   await journal.close();
 * }
 */

export { auditInBoundedHeap, type BoundedAuditOptions } from "./adapters/boundedAudit.js";
export { openStoreReader } from "./adapters/store.js";
export { type TemporarySpillOptions, temporarySpill } from "./adapters/stores/libsql/temporarySpill.js";
export {
  type AuditFinding,
  type AuditOptions,
  type AuditReport,
  type AuditSpill,
  auditJournal,
  type ExpectedHead,
  type ExpectedHeadResult,
  FINDING_KINDS,
  type FindingKind,
  type Head,
  headDigest,
  memorySpill,
  parseExpectedHead,
} from "./runtime/audit/index.js";
export type { HeadAnchor, JournalReader } from "./runtime/Journal.js";
