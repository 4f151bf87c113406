import { describeAnchor } from "../../../../runtime/anchor.js";
import type { AuditFinding, AuditReport, ExpectedHead } from "../../../../runtime/audit.js";
import { auditInBoundedHeap } from "../../../boundedAudit.js";
import { writeAnchor } from "../../../stores/libsql/anchor.js";
import { ExitCode, usageError } from "../CliError.js";
import { withExistingReader } from "../journalAccess.js";
import type { Io } from "../Output.js";

export interface AuditOptions {
  readonly db?: string;
  readonly json?: boolean;
  readonly expectHead?: ExpectedHead | null;
  /** After a deliberate restore: anchor the current head when the audit finds nothing else. */
  readonly acceptHead?: boolean;
}

/** The findings `--accept-head` settles: the anchor's own. Any other finding keeps the anchor as it is. */
const ANCHOR_KINDS: ReadonlySet<AuditFinding["kind"]> = new Set(["lost-commits", "anchor-damaged"]);

/** Progress goes to stderr every this many events, so long audits show they are moving. */
export const AUDIT_PROGRESS_EVERY = 10_000;

/** `--expect-head D` or `D@P`: a 64-hex-digit digest, optionally with the position it was taken at. */

const where = (f: AuditFinding): string => {
  if (f.streamId === null) return f.projection ? `${f.projection}/${f.key ?? ""}` : "(log)";
  const at = f.version === null ? f.streamId : `${f.streamId}@${f.version}`;
  return f.projection ? `${at} (${f.projection}/${f.key ?? ""})` : at;
};

/** The report for people: what was checked, the head digest to anchor, then one line per finding. */
const humanLines = (report: AuditReport, location: string): string[] => {
  const lines = [
    `audited ${report.events} events in ${report.streams} streams (${report.runs} runs) of ${location}, up to position ${report.lastPosition}`,
    report.sealedUnchecked > 0
      ? "projections: not compared (they are built from the encrypted contents)"
      : `projections rebuilt and compared: ${report.projections.map((p) => `${p.name} ${p.rows}`).join(", ")}`,
  ];
  if (report.prunedStreams > 0) lines.push(`streams removed by retention: ${report.prunedStreams}`);
  const orphaned = report.orphanedOutcomes.length + report.orphanedOutcomesOmitted;
  if (orphaned > 0) {
    lines.push(
      `${orphaned} outcome${orphaned === 1 ? "" : "s"} arrived after ${orphaned === 1 ? "its run was" : "their runs were"} pruned (kept as outcome.orphaned; not a finding — the effect took place, see \`holdfast events\`):`,
    );
    for (const o of report.orphanedOutcomes)
      lines.push(`  ${`${o.streamId}@${o.version}`.padEnd(16)} ${o.callId} attempt ${o.attempt}`);
    if (report.orphanedOutcomesOmitted > 0)
      lines.push(`  … and ${report.orphanedOutcomesOmitted} more (not listed)`);
  }
  if (report.sealedUnchecked > 0)
    lines.push(
      `${report.sealedUnchecked} events have encrypted fields and HOLDFAST_ENCRYPTION_KEY is not set: their hash chains were verified; their contents, the runs they belong to and the projections were not checked (set the key for a full audit)`,
    );
  if (report.movedDuringAudit)
    lines.push("events were appended during the audit: cache rows changed since were not compared");
  lines.push(`head digest: ${report.headDigest}`);
  lines.push(`anchor: ${report.headDigest}@${report.lastPosition}  (check later with --expect-head)`);
  if (report.anchor)
    lines.push(
      `head anchor: ${describeAnchor(report.anchor)}: ${report.anchor.holds ? "held by the log" : "NOT in the log"}`,
    );
  if (report.expectedHead)
    lines.push(
      `expected head ${report.expectedHead.digest}${report.expectedHead.position === null ? "" : `@${report.expectedHead.position}`}: ${report.expectedHead.matches ? "matches" : "DIFFERS"}`,
    );
  const count = report.findings.length + report.findingsOmitted;
  if (count === 0) {
    lines.push(
      report.sealedUnchecked > 0
        ? "clean as far as checked: every chain verifies; the encrypted contents were not checked"
        : "clean: every chain verifies, every run folds, the laws hold, the caches equal the events",
    );
    return lines;
  }
  lines.push(`${count} finding${count === 1 ? "" : "s"}:`);
  for (const f of report.findings) lines.push(`  ${f.kind.padEnd(28)} ${where(f).padEnd(36)} ${f.detail}`);
  if (report.findingsOmitted > 0) lines.push(`  … and ${report.findingsOmitted} more (not listed)`);
  lines.push("the journal was not changed; see docs/audit.md for what each kind means");
  return lines;
};

/** What `--accept-head` did: the anchor written, or why not. */
interface Accepted {
  readonly written: boolean;
  readonly anchor: AuditReport["lastEvent"];
  readonly reason: string;
}

/**
 * `--accept-head`: the audit found nothing but the anchor's own findings, so the log as it stands
 * is whole and becomes what the anchor names. Written only after a person asked, never by itself.
 */
const acceptHead = (report: AuditReport, location: string): Accepted => {
  const others = report.findings.filter((f) => !ANCHOR_KINDS.has(f.kind)).length + report.findingsOmitted;
  if (others > 0)
    return {
      written: false,
      anchor: null,
      reason: `the anchor was not changed: the audit has ${others} other finding${others === 1 ? "" : "s"}; resolve ${others === 1 ? "it" : "them"} first`,
    };
  if (report.sealedUnchecked > 0)
    return {
      written: false,
      anchor: null,
      reason:
        "the anchor was not changed: encrypted events were not checked; set HOLDFAST_ENCRYPTION_KEY and run it again",
    };
  const head = report.lastEvent ?? { position: 0, streamId: "", version: 0, hash: "" };
  writeAnchor(location, head);
  return {
    written: true,
    anchor: head,
    reason:
      head.position === 0
        ? "head anchor written: the journal holds no events"
        : `head anchor written: ${describeAnchor(head)} is the accepted head`,
  };
};

/**
 * `holdfast audit`: verify the whole log, read-only. Exit 0 when clean, 1 with findings (each
 * with its kind, stream, version and detail). `--accept-head` writes the head anchor anew when
 * the only findings are the anchor's (after a deliberate restore) and then exits 0.
 */
export const auditCommand = async (
  options: AuditOptions,
  io: Io,
  stderr: NodeJS.WritableStream,
): Promise<number> =>
  withExistingReader(
    options.db,
    async (journal) => {
      if (options.acceptHead && journal.engine !== "libsql")
        throw usageError(
          "--accept-head is for libSQL journals",
          "a PostgreSQL journal keeps no head anchor (docs/decisions/0012-head-anchor-and-read-only-opens.md)",
        );
      const report = await auditInBoundedHeap(options.db, journal, {
        expectHead: options.expectHead ?? null,
        progressEvery: AUDIT_PROGRESS_EVERY,
        onProgress: (events) => {
          stderr.write(`audit: ${events} events checked…\n`);
        },
        onWorker: (heapMib) => {
          stderr.write(`audit: a long log, audited in a worker thread with a ${heapMib} MiB heap\n`);
        },
        onFallback: (why) => {
          stderr.write(`audit: ${why}\n`);
        },
      });
      const accepted = options.acceptHead ? acceptHead(report, journal.location) : null;
      if (options.json)
        await io.out.json({ journal: journal.location, ...report, ...(accepted ? { accepted } : {}) });
      else {
        await io.out.lines(humanLines(report, journal.location));
        if (accepted) await io.out.line(accepted.reason);
      }
      if (accepted) return accepted.written ? ExitCode.ok : ExitCode.failed;
      return report.clean ? ExitCode.ok : ExitCode.failed;
    },
    NO_KEY_CHECK,
  );

/** The audit opens without the key check: without the key it still verifies every chain. */
const NO_KEY_CHECK = { libsql: { keyCheck: false }, postgres: { keyCheck: false } } as const;
