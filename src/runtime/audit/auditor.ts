import {
  type AnyEvent,
  decodeRow,
  EventDecodeError,
  EventDecryptError,
  GENESIS_HASH,
  GRAPH_STREAM_PREFIX,
  type Keyring,
  QUEUE_STREAM_PREFIX,
  queueStreamId,
  type RecordedEvent,
  SCHEDULE_STREAM_PREFIX,
  type StoredRow,
  SYSTEM_STREAM,
} from "../../events/index.js";
import { type AnyProjection, inlineProjections } from "../../projections/index.js";
import type { PrunedHead } from "../anchor.js";
import type { Admission, HeadAnchor, StoredProjectionRow } from "../Journal.js";
import { checkChain, misplaced } from "./chain.js";
import { type AuditFinding, Findings } from "./findings.js";
import { type ForkCheck, ForkChecks } from "./forks.js";
import {
  type ExpectedHead,
  ExpectedHeadCheck,
  type ExpectedHeadResult,
  type Head,
  HeadAnchorCheck,
  headDigest,
} from "./heads.js";
import { RebuiltProjections } from "./projections.js";
import { QueueChecks } from "./queue.js";
import { type AdmissionCheck, RunChecks, type RunTrack } from "./runs.js";
import { ScheduleChecks } from "./schedules.js";
import { type AuditSpill, memorySpill } from "./spill.js";

/** What an audit found: `clean`, the findings, what it read, and the head digest to anchor. */
export interface AuditReport {
  readonly clean: boolean;
  readonly findings: ReadonlyArray<AuditFinding>;
  /** Findings beyond `maxFindings`, counted but not kept. */
  readonly findingsOmitted: number;
  readonly events: number;
  readonly streams: number;
  readonly runs: number;
  /** The position of the last event audited. */
  readonly lastPosition: number;
  /** sha256 over every stream head (docs/audit.md); anchor it as `headDigest@lastPosition`. */
  readonly headDigest: string;
  readonly projections: ReadonlyArray<{ readonly name: string; readonly rows: number }>;
  /** Streams the log records as removed by retention. */
  readonly prunedStreams: number;
  /**
   * Outcomes that arrived after retention had removed their run, kept in the `system` stream as
   * `outcome.orphaned` (law 5): not findings, but effects a person may want to know about. The
   * first `maxFindings` are listed, the rest counted.
   */
  readonly orphanedOutcomes: ReadonlyArray<OrphanedOutcome>;
  readonly orphanedOutcomesOmitted: number;
  readonly expectedHead: ExpectedHeadResult | null;
  /** Events were appended while the audit ran: cache rows changed since were not compared. */
  readonly movedDuringAudit: boolean;
  /**
   * Events with encrypted fields that no key was given to open: their chains were verified, their
   * contents (and the runs and projections built from them) were not. 0 with the key.
   */
  readonly sealedUnchecked: number;
  /**
   * The head anchor the journal keeps outside its database (libSQL), and whether the log still
   * holds the event it names; null when there is none (PostgreSQL, or a journal not opened since).
   */
  readonly anchor: (HeadAnchor & { readonly holds: boolean }) | null;
  /** The last event audited (null: an empty log): what `holdfast audit --accept-head` anchors. */
  readonly lastEvent: HeadAnchor | null;
}

/** An `outcome.orphaned` event, where it is and what it names. */
export interface OrphanedOutcome {
  readonly runId: string;
  readonly callId: string;
  readonly attempt: number;
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
}

export interface LogAuditorOptions {
  readonly expectHead?: ExpectedHead | null;
  readonly projections?: ReadonlyArray<AnyProjection>;
  /** Findings kept in the report; more are counted. Default 1000. */
  readonly maxFindings?: number;
  /** The keys that open encrypted fields (the journal's); null: such events get chain checks only. */
  readonly keyring?: Keyring | null;
  /** The journal's head anchor: the log must still hold the event it names (`lost-commits`). */
  readonly anchor?: HeadAnchor | null;
  /**
   * Where rows and records not needed at hand are set aside (default: {@link memorySpill}). The
   * caller closes it after `finish`.
   */
  readonly spill?: AuditSpill;
  /** Rebuilt rows each projection keeps at hand; the rest wait in the spill. Default 2 000. */
  readonly rowsInMemory?: number;
}

/** What a {@link LogAuditor} holds in memory now: what stays bounded while the log grows. */
export interface Retained {
  /** Streams seen: each keeps its head (version and hash). */
  readonly streams: number;
  /** Runs whose machine fold is held: only runs that have not ended. */
  readonly runFolds: number;
  /** Runs whose call records are held: only runs that have not ended. */
  readonly callRecords: number;
  /** Rebuilt projection rows held (at most `rowsInMemory` per projection; none once compared). */
  readonly rows: number;
}

interface StreamState {
  /** The highest version seen and its hash: the stream's head, and what the next row must chain to. */
  version: number;
  hash: string;
  run: RunTrack | null;
  /** An event of this stream could not be opened without a key: the rest get chain checks only. */
  sealed: boolean;
  /** Retention recorded removing this stream: each of its rows is `pruned-stream-present`. */
  pruned: boolean;
}

/**
 * A LangGraph thread id is the application's to use again after `deleteThread`: its stream begins
 * again at version 1 from genesis, after the record of the removal (rows come in log order). A run
 * id is never used again, so a removed run stream that comes back stays `pruned-stream-present`;
 * so does a removed thread whose rows are still there, or that resumes past version 1.
 */
const beginsAgain = (row: StoredRow): boolean =>
  row.streamId.startsWith(GRAPH_STREAM_PREFIX) && row.version === 1 && row.prevHash === GENESIS_HASH;

/** A fork's first commit as the audit reads it: the run, and its fork point once `run.forked` was read. */
interface ForkCommit {
  readonly runId: string;
  readonly atCall: number;
}

/** The seq of a call id of `runId` (`<runId>/<seq>`), or undefined when it is not one. */
const seqIn = (runId: string, callId: string): number | undefined => {
  if (!callId.startsWith(`${runId}/`)) return undefined;
  const seq = Number(callId.slice(runId.length + 1));
  return Number.isSafeInteger(seq) && seq >= 0 ? seq : undefined;
};

/**
 * Whether an event of `streamId` continues the first commit of the fork `admitted` began (decision
 * 0083): `run.forked` right after `run.admitted`, then only copies of the calls before its
 * `atCall` — attempt-1 intents, and outcomes reused or edited. Returns the fork as read so far, or
 * null: the event is not part of it.
 */
const inForkCommit = (
  admitted: Extract<AnyEvent, { type: "run.admitted" }>,
  fork: ForkCommit | null,
  streamId: string,
  event: AnyEvent,
): ForkCommit | null => {
  const runId = admitted.runId;
  if (streamId !== `run-${runId}`) return null;
  if (event.type === "run.forked")
    return fork === null && event.runId === runId ? { runId, atCall: event.atCall } : null;
  if (fork === null) return null;
  const copied =
    event.type === "call.intended"
      ? event.runId === runId &&
        event.attempt === 1 &&
        event.callId === `${runId}/${event.seq}` &&
        event.seq < fork.atCall
      : (event.type === "call.completed" && (event.reused !== undefined || event.edited !== undefined)) ||
          (event.type === "call.failed" && event.reused !== undefined)
        ? event.runId === runId &&
          event.attempt === 1 &&
          (seqIn(runId, event.callId) ?? fork.atCall) < fork.atCall
        : false;
  return copied ? fork : null;
};

/** The spill space of the ids of the streams retention recorded as removed. */
const PRUNED = "pruned";

/**
 * The audit's checks, pure: fed the stored rows in position order (one page at a time), then the
 * stored caches. Holds per stream its chain head; for a run that has not ended its machine fold
 * and a small record per call, for one that ended its status; per projection the rows touched
 * last. The rest waits in the spill. Never the events themselves.
 */
export class LogAuditor {
  private readonly findings: Findings;
  private readonly streams = new Map<string, StreamState>();
  private readonly runs: RunChecks;
  private readonly queues = new QueueChecks();
  private readonly schedules = new ScheduleChecks();
  private readonly forks = new ForkChecks();
  /** The event of the row fed last, when it decoded: a queue's admission must follow its run's. */
  private previous: AnyEvent | null = null;
  /** The fork whose first commit `previous` (its `run.admitted`) began, once its `run.forked` was read. */
  private forkCommit: ForkCommit | null = null;
  private readonly rebuilt: RebuiltProjections;
  private readonly spill: AuditSpill;
  private prunedCount = 0;
  private readonly orphaned: OrphanedOutcome[] = [];
  private orphanedOmitted = 0;
  private readonly maxListed: number;
  private readonly expected: ExpectedHeadCheck;
  private readonly headAnchor: HeadAnchorCheck;
  private readonly keyring: Keyring | null;
  private eventCount = 0;
  private last = 0;
  private sealedCount = 0;
  private lastRow: HeadAnchor | null = null;

  constructor(options: LogAuditorOptions = {}) {
    this.maxListed = options.maxFindings ?? 1000;
    this.findings = new Findings(this.maxListed);
    this.keyring = options.keyring ?? null;
    this.expected = new ExpectedHeadCheck(options.expectHead ?? null);
    this.headAnchor = new HeadAnchorCheck(options.anchor ?? null);
    const spill = options.spill ?? memorySpill();
    this.spill = spill;
    this.runs = new RunChecks(this.findings, spill);
    this.rebuilt = new RebuiltProjections(
      options.projections ?? inlineProjections,
      this.findings,
      spill,
      Math.max(1, options.rowsInMemory ?? 2_000),
    );
  }

  get events(): number {
    return this.eventCount;
  }

  get lastPosition(): number {
    return this.last;
  }

  /** Events whose encrypted contents could not be checked (no key). */
  get sealedUnchecked(): number {
    return this.sealedCount;
  }

  /** What is held in memory now (tests use it to show that memory follows open runs, not the log). */
  retained(): Retained {
    const runs: RunTrack[] = [];
    for (const s of this.streams.values()) if (s.run) runs.push(s.run);
    const { folds, callRecords } = this.runs.retained(runs);
    return { streams: this.streams.size, runFolds: folds, callRecords, rows: this.rebuilt.retained() };
  }

  // ------------------------------------------------------------------ the log

  /** Check one stored row. Rows must come in position order. */
  feed(row: StoredRow): void {
    this.expected.beforeRow(row.position, () => this.currentHeads());
    this.eventCount += 1;
    this.last = row.position;
    this.lastRow = { position: row.position, streamId: row.streamId, version: row.version, hash: row.hash };
    this.headAnchor.noteRow(row.position, row.hash);
    this.findings.rowHasFinding = false;
    const at = { streamId: row.streamId, version: row.version, position: row.position };
    const before = this.previous;
    const fork = this.forkCommit;
    this.previous = null;
    this.forkCommit = null;

    let stream = this.streams.get(row.streamId);
    if (!stream) {
      const pruned = this.spill.get(PRUNED, row.streamId) !== undefined && !beginsAgain(row);
      stream = { version: 0, hash: GENESIS_HASH, run: null, sealed: false, pruned };
      this.streams.set(row.streamId, stream);
    }
    if (stream.pruned)
      this.findings.add({
        ...at,
        kind: "pruned-stream-present",
        detail: "retention recorded this stream as removed",
      });
    for (const finding of checkChain(row, stream)) this.findings.add(finding);
    if (stream.sealed) {
      this.sealedCount += 1;
      return;
    }

    let recorded: RecordedEvent;
    try {
      recorded = decodeRow(row, this.keyring);
    } catch (error) {
      if (error instanceof EventDecryptError && error.reason === "no-key") {
        // Without the key the chain is all that can be verified (DESIGN §9): say so, do not guess.
        // The system stream's events stand alone (an orphaned outcome is sealed, the next prune is not).
        stream.sealed = row.streamId !== SYSTEM_STREAM;
        this.sealedCount += 1;
        return;
      }
      if (error instanceof EventDecryptError) {
        this.findings.add({ ...at, kind: "undecryptable", detail: error.cause });
        return;
      }
      const cause = error instanceof EventDecodeError ? error.cause : String(error);
      this.findings.add({ ...at, kind: "undecodable", detail: cause });
      return;
    }
    const event = recorded.event;
    // A fork's first commit holds its reused calls after `run.admitted` (decision 0083): a queue's
    // `input.admitted` after them is still in the commit of that run's admission.
    const forkSoFar =
      before?.type === "run.admitted" ? inForkCommit(before, fork, row.streamId, event) : null;
    this.previous = forkSoFar ? before : event;
    this.forkCommit = forkSoFar;
    const wrong = misplaced(row.streamId, event);
    if (wrong) this.findings.add({ ...at, kind: "wrong-stream", detail: wrong });
    else if (row.streamId.startsWith("run-")) {
      this.runs.check(recorded, stream);
      const forkBreach = this.forks.check(recorded);
      if (forkBreach) this.findings.add(forkBreach);
      if (event.type === "run.admitted" && event.chatId.startsWith(SCHEDULE_STREAM_PREFIX))
        this.schedules.noteAdmission(recorded);
    } else if (row.streamId.startsWith(QUEUE_STREAM_PREFIX)) {
      const breach = this.queues.check(recorded, before);
      if (breach) this.findings.add({ ...at, ...breach });
    } else if (row.streamId.startsWith(SCHEDULE_STREAM_PREFIX)) {
      const breach = this.schedules.check(recorded);
      if (breach) this.findings.add({ ...at, ...breach });
    } else if (event.type === "retention.pruned") this.notePruned(event.streams, row.position);
    else if (event.type === "outcome.orphaned") {
      const { runId, callId, attempt } = event;
      if (this.orphaned.length < this.maxListed) this.orphaned.push({ runId, callId, attempt, ...at });
      else this.orphanedOmitted += 1;
    }
    this.rebuilt.evolve(recorded);
  }

  private notePruned(entries: ReadonlyArray<PrunedHead>, position: number): void {
    for (const entry of entries) {
      this.headAnchor.notePruned(entry, position);
      if (entry.streamId.startsWith("run-")) {
        this.queues.runPruned(entry.streamId.slice(4));
        this.schedules.runPruned(entry.streamId.slice(4));
      }
      const stream = this.streams.get(entry.streamId);
      if (stream) {
        stream.pruned = true;
        this.findings.add({
          streamId: entry.streamId,
          version: entry.version,
          position,
          kind: "pruned-stream-present",
          detail: "retention recorded this stream as removed, but its events are still in the log",
        });
      }
      // Kept in the spill: a journal pruned for years lists more removed streams than it holds.
      if (this.spill.get(PRUNED, entry.streamId) === undefined) {
        this.spill.put(PRUNED, entry.streamId, "");
        this.prunedCount += 1;
      }
      this.expected.notePruned(entry);
    }
  }

  /** Admissions to look up in the journal, collected since the last call. */
  takeAdmissionChecks(): AdmissionCheck[] {
    return this.runs.takeAdmissionChecks();
  }

  /** The journal's admission row for a check (null: none). */
  admissionFound(check: AdmissionCheck, admission: Admission | null): void {
    this.runs.admissionFound(check, admission);
  }

  /** Forks' reused outcomes to look up in their source runs, collected since the last call. */
  takeForkChecks(): ForkCheck[] {
    return this.forks.take();
  }

  /** The source event at a fork check's coordinates (undefined: none). */
  forkSourceFound(
    check: ForkCheck,
    source: RecordedEvent | undefined,
    sourceIntent?: Parameters<ForkChecks["found"]>[2],
  ): void {
    const finding = this.forks.found(check, source, sourceIntent);
    if (finding) this.findings.add(finding);
  }

  // ------------------------------------------------------------------ projections

  /**
   * Compare a page of a projection's stored rows with the rebuilt ones. A stored row newer than
   * the audited log is only a finding if the log did not move meanwhile (decided in `finish`).
   */
  compareStored(name: string, stored: ReadonlyArray<StoredProjectionRow>): void {
    this.rebuilt.compareStored(name, stored, this.last);
  }

  /** After every stored page of a projection: rebuilt rows never seen are missing. */
  endProjection(name: string): void {
    this.rebuilt.endProjection(name);
  }

  // ------------------------------------------------------------------ the end

  private currentHeads(): Head[] {
    const heads: Head[] = [];
    for (const [streamId, s] of this.streams) heads.push({ streamId, version: s.version, hash: s.hash });
    return heads;
  }

  /**
   * Runs whose active-run guard disagrees with their fold. The driver re-reads each run's head:
   * a run that moved during the audit is not a finding.
   */
  guardMismatches(activeRunIds: ReadonlySet<string>): Array<AuditFinding & { readonly runId: string }> {
    const streams = this.streams;
    function* runStreams() {
      for (const [streamId, s] of streams)
        yield { streamId, version: s.version, sealed: s.sealed, run: s.run };
    }
    return this.runs.guardMismatches(
      runStreams(),
      activeRunIds,
      (streamId) => this.spill.get(PRUNED, streamId) !== undefined,
    );
  }

  /**
   * Chats whose queue index row (`queue_pending`, what recovery finds idle queues by) disagrees with
   * their queue stream's pending inputs. The driver re-reads each stream's head: a queue that moved
   * during the audit is not a finding. Streams that could not be opened (no key) are left out.
   */
  queueIndexMismatches(
    stored: ReadonlyArray<{ readonly chatId: string; readonly pending: number }>,
  ): AuditFinding[] {
    const index = new Map(stored.map((row) => [queueStreamId(row.chatId), row.pending]));
    const counts = this.queues.pendingCounts();
    const found: AuditFinding[] = [];
    for (const streamId of new Set([...index.keys(), ...counts.keys()])) {
      const stream = this.streams.get(streamId);
      if (stream?.sealed) continue;
      const fromEvents = counts.get(streamId) ?? 0;
      const fromIndex = index.get(streamId) ?? 0;
      if (fromEvents === fromIndex) continue;
      found.push({
        kind: "queue-mismatch",
        streamId,
        version: stream?.version ?? null,
        detail: `the queue index says ${fromIndex} input(s) pending, the queue stream ${fromEvents}: recovery ${fromIndex < fromEvents ? "would not find this chat's queue" : "looks for inputs that do not wait"}`,
      });
    }
    return found;
  }

  /**
   * Runs of a schedule's chat admitted for a tick the schedule passed, named by no record (decision
   * 0060). The driver re-reads each schedule stream's head: one that moved during the audit (a
   * correction may have come) is not a finding.
   */
  scheduleRunsUnnamed(): AuditFinding[] {
    return this.schedules.unnamedRuns().filter((f) => !(f.streamId && this.streams.get(f.streamId)?.sealed));
  }

  /** Record findings the driver confirmed (guard mismatches still true after re-reading). */
  confirm(findings: ReadonlyArray<AuditFinding>): void {
    for (const f of findings) this.findings.add(f);
  }

  /** Close the audit. `moved`: events were appended after the audited log ended. */
  finish(moved: boolean): AuditReport {
    for (const finding of this.queues.finish()) this.findings.add(finding);
    for (const finding of this.schedules.finish()) this.findings.add(finding);
    const pruned = (runId: string) => this.spill.get(PRUNED, `run-${runId}`) !== undefined;
    for (const finding of this.forks.finish(pruned)) this.findings.add(finding);
    this.findings.settle(moved);
    const heads = this.currentHeads();
    const digest = headDigest(heads);
    const expected = this.expected.finish(heads, digest, this.last);
    if (expected.finding) this.findings.add(expected.finding);
    const anchored = this.headAnchor.finish(this.last);
    if (anchored.finding) this.findings.add(anchored.finding);
    return {
      clean: this.findings.list.length === 0 && this.findings.omitted === 0,
      findings: this.findings.list,
      findingsOmitted: this.findings.omitted,
      events: this.eventCount,
      streams: this.streams.size,
      runs: this.runs.runs,
      lastPosition: this.last,
      headDigest: digest,
      projections: this.rebuilt.rowCounts(),
      prunedStreams: this.prunedCount,
      orphanedOutcomes: this.orphaned,
      orphanedOutcomesOmitted: this.orphanedOmitted,
      expectedHead: expected.result,
      movedDuringAudit: moved,
      sealedUnchecked: this.sealedCount,
      anchor: anchored.anchor,
      lastEvent: this.lastRow,
    };
  }
}
