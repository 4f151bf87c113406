import { InvalidArgumentError } from "commander";
import {
  type AuditFinding,
  type AuditReport,
  auditJournal,
  parseExpectedHead,
} from "../../../runtime/audit.js";
import { ExitCode } from "../CliError.js";
import { withExistingJournal } from "../journalAccess.js";
import type { Io } from "../Output.js";

export interface AuditOptions {
  readonly db?: string;
  readonly json?: boolean;
  readonly expectHead?: ReturnType<typeof parseExpectedHead>;
}

/** Progress goes to stderr every this many events, so long audits show they are moving. */
export const AUDIT_PROGRESS_EVERY = 10_000;

/** `--expect-head D` or `D@P`: a 64-hex-digit digest, optionally with the position it was taken at. */
export const parseExpectHead = (value: string) => {
  const parsed = parseExpectedHead(value);
  if (!parsed)
    throw new InvalidArgumentError(
      `--expect-head takes the 64-hex-digit head digest an audit printed, or DIGEST@POSITION, got "${value}"`,
    );
  return parsed;
};

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
  if (report.sealedUnchecked > 0)
    lines.push(
      `${report.sealedUnchecked} events have encrypted fields and HOLDFAST_ENCRYPTION_KEY is not set: their hash chains were verified; their contents, the runs they belong to and the projections were not checked (set the key for a full audit)`,
    );
  if (report.movedDuringAudit)
    lines.push("events were appended during the audit: cache rows changed since were not compared");
  lines.push(`head digest: ${report.headDigest}`);
  lines.push(`anchor: ${report.headDigest}@${report.lastPosition}  (check later with --expect-head)`);
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
  lines.push("nothing was changed; see docs/audit.md for what each kind means");
  return lines;
};

/**
 * `holdfast audit`: verify the whole log, read-only. Exit 0 when clean, 1 with findings (each
 * with its kind, stream, version and detail).
 */
export const auditCommand = async (
  options: AuditOptions,
  io: Io,
  stderr: NodeJS.WritableStream,
): Promise<number> =>
  withExistingJournal(
    options.db,
    async (journal) => {
      const report = await auditJournal(journal, {
        expectHead: options.expectHead ?? null,
        progressEvery: AUDIT_PROGRESS_EVERY,
        onProgress: (events) => {
          stderr.write(`audit: ${events} events checked…\n`);
        },
      });
      if (options.json) await io.out.json({ journal: journal.location, ...report });
      else await io.out.lines(humanLines(report, journal.location));
      return report.clean ? ExitCode.ok : ExitCode.failed;
    },
    NO_KEY_CHECK,
  );

/** The audit opens without the key check: without the key it still verifies every chain. */
const NO_KEY_CHECK = { libsql: { keyCheck: false }, postgres: { keyCheck: false } } as const;
