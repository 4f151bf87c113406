import { EventDecryptError, type RecordedEvent, runStreamId, SealError } from "../../events/index.js";
import { inlineProjections } from "../../projections/index.js";
import type { AnchorReading, JournalReader, StoredProjectionRow } from "../Journal.js";
import { type AuditReport, LogAuditor } from "./auditor.js";
import type { AuditFinding } from "./findings.js";
import type { ForkCheck } from "./forks.js";
import type { ExpectedHead } from "./heads.js";
import { type AuditSpill, memorySpill } from "./spill.js";

export { type AuditReport, LogAuditor, type LogAuditorOptions, type Retained } from "./auditor.js";
export { type AuditFinding, FINDING_KINDS, type FindingKind } from "./findings.js";
export {
  type ExpectedHead,
  type ExpectedHeadResult,
  type Head,
  headDigest,
  parseExpectedHead,
} from "./heads.js";
export type { AdmissionCheck } from "./runs.js";
export { type AuditSpill, memorySpill } from "./spill.js";

/** How an audit reads the log: the expected head, page size, progress, spill. */
export interface AuditOptions {
  /** Report a finding when the head digest (or the heads as of a position) differs. */
  readonly expectHead?: ExpectedHead | null;
  /** Events read per page (default 1000): memory holds one page of events at a time. */
  readonly pageSize?: number;
  /** Called every `progressEvery` events (default 10 000) with the count so far. */
  readonly onProgress?: (events: number) => void;
  readonly progressEvery?: number;
  readonly maxFindings?: number;
  /**
   * Makes the spill where the audit sets aside rebuilt rows and ended runs' call records; the audit
   * closes it when done. Default {@link memorySpill}; the adapters' `temporarySpill` moves to a
   * temporary file past a threshold, which is what keeps the audit of a long log in bounded memory.
   */
  readonly spill?: () => AuditSpill;
  /** Rebuilt rows each projection keeps at hand (default 2 000); the rest wait in the spill. */
  readonly rowsInMemory?: number;
}

/**
 * Audit a journal (law 12, DESIGN §8): stream the whole log in pages over the raw rows, verify
 * every chain, fold every run through its recorded machine version, check the laws across events
 * and the admissions, rebuild every inline projection and compare it with the stored rows, and
 * check the active-run guard. Reads only; never repairs (law 11).
 *
 * @example
 * const report = await auditJournal(journal);
 * if (!report.clean) for (const f of report.findings) console.log(f.kind, f.streamId, f.version, f.detail);
 */
export const auditJournal = async (
  journal: JournalReader,
  options: AuditOptions = {},
): Promise<AuditReport> => {
  // Read before the log: the anchor names a committed event, so a log read afterwards holds it.
  const anchor = journal.headAnchor ? await journal.headAnchor() : { kind: "none" as const };
  const spill = (options.spill ?? memorySpill)();
  try {
    return await auditWith(journal, options, anchor, spill);
  } finally {
    spill.close();
  }
};

/**
 * The event a fork's reused outcome names, read from its source run's stream (undefined: none;
 * null: it cannot be opened here — sealed without the key — and is left unchecked, as the chain is).
 */
const forkSource = async (
  journal: JournalReader,
  check: ForkCheck,
): Promise<{ event: RecordedEvent | undefined; intent?: NonNullable<ForkCheck["intent"]> } | null> => {
  const { runId, version, callId } = check.source;
  try {
    // Up to the outcome: the source call's latest intent before it, and the outcome event itself.
    const events = await journal.readStream(runStreamId(runId));
    const event = events.find((e) => e.version === version);
    const intended = events.findLast(
      (e) => e.version < version && e.event.type === "call.intended" && e.event.callId === callId,
    )?.event;
    const intent =
      intended?.type === "call.intended"
        ? { seq: intended.seq, kind: intended.kind, name: intended.name, fingerprint: intended.fingerprint }
        : undefined;
    return { event, ...(intent ? { intent } : {}) };
  } catch (error) {
    if (error instanceof EventDecryptError && error.reason === "no-key") return null;
    throw error;
  }
};

/**
 * Let the rest of the process run between pages: the driver reads synchronously, so without this
 * an audit of a long log holds the event loop for its whole length — a runtime's heartbeat would
 * not renew its leases (its runs taken over meanwhile), a server would answer nobody.
 */
const turnOfTheLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const auditWith = async (
  journal: JournalReader,
  options: AuditOptions,
  anchor: AnchorReading,
  spill: AuditSpill,
): Promise<AuditReport> => {
  const pageSize = options.pageSize ?? 1000;
  const every = options.progressEvery ?? 10_000;
  const auditor = new LogAuditor({
    expectHead: options.expectHead ?? null,
    keyring: journal.keyring,
    anchor: anchor.kind === "anchored" ? anchor.anchor : null,
    spill,
    ...(options.maxFindings === undefined ? {} : { maxFindings: options.maxFindings }),
    ...(options.rowsInMemory === undefined ? {} : { rowsInMemory: options.rowsInMemory }),
  });
  if (anchor.kind === "damaged")
    auditor.confirm([
      {
        streamId: null,
        version: null,
        kind: "anchor-damaged",
        detail: `the head anchor ${anchor.path} cannot be read (${anchor.detail}): lost commits cannot be ruled out`,
      },
    ]);
  let after = 0;
  let nextProgress = every;
  for (;;) {
    const page = await journal.readAllRows({ after, limit: pageSize });
    for (const row of page) auditor.feed(row);
    for (const check of auditor.takeAdmissionChecks())
      auditor.admissionFound(check, await journal.admission(check.chatId, check.inputId));
    for (const check of auditor.takeForkChecks()) {
      const source = await forkSource(journal, check);
      if (source !== null) auditor.forkSourceFound(check, source.event, source.intent);
    }
    const last = page.at(-1);
    if (!last) break;
    after = last.position;
    if (options.onProgress && auditor.events >= nextProgress) {
      options.onProgress(auditor.events);
      nextProgress = (Math.floor(auditor.events / every) + 1) * every;
    }
    if (page.length < pageSize) break;
    await turnOfTheLoop();
  }
  // Without the key the rebuilt caches are incomplete and the stored ones sealed: not compared.
  for (const projection of auditor.sealedUnchecked > 0 ? [] : inlineProjections) {
    let key: string | null = null;
    let readable = true;
    for (;;) {
      let page: ReadonlyArray<StoredProjectionRow>;
      try {
        page = await journal.projectionPage(projection.name, { after: key, limit: pageSize });
      } catch (error) {
        if (!(error instanceof SealError)) throw error;
        // Stored sealed under a key this audit was not given: one finding, the projection is skipped.
        auditor.confirm([
          {
            streamId: null,
            version: null,
            kind: "undecryptable",
            detail: error.detail,
            projection: projection.name,
          },
        ]);
        readable = false;
        break;
      }
      auditor.compareStored(projection.name, page);
      const last = page.at(-1);
      if (!last || page.length < pageSize) break;
      key = last.key;
      await turnOfTheLoop();
    }
    if (readable) auditor.endProjection(projection.name);
  }
  const guard = auditor.guardMismatches(new Set(await journal.activeRuns()));
  const confirmed: AuditFinding[] = [];
  for (const { runId: _runId, ...finding } of guard) {
    // A run that moved on while the audit read the guard is not a finding.
    const head = finding.streamId ? await journal.streamHead(finding.streamId) : null;
    if ((head?.version ?? null) === finding.version || (finding.version === null && head === null))
      confirmed.push(finding);
  }
  auditor.confirm(confirmed);
  const queues: AuditFinding[] = [];
  for (const finding of auditor.queueIndexMismatches(await journal.queuePending())) {
    // A queue that moved while the audit read the index is not a finding.
    const head = finding.streamId ? await journal.streamHead(finding.streamId) : null;
    if ((head?.version ?? null) === finding.version) queues.push(finding);
  }
  auditor.confirm(queues);
  const schedules: AuditFinding[] = [];
  for (const finding of auditor.scheduleRunsUnnamed()) {
    // A schedule that moved while the audit ran may have had its tick corrected meanwhile.
    const head = finding.streamId ? await journal.streamHead(finding.streamId) : null;
    if ((head?.version ?? null) === finding.version) schedules.push(finding);
  }
  auditor.confirm(schedules);
  const moved = (await journal.readAllRows({ after: auditor.lastPosition, limit: 1 })).length > 0;
  return auditor.finish(moved);
};
