import {
  type AnyEvent,
  canonicalJson,
  decodeRow,
  digestOf,
  EventDecodeError,
  EventDecryptError,
  GENESIS_HASH,
  type Keyring,
  type RecordedEvent,
  rowHash,
  SealError,
  type StoredRow,
  sha256Hex,
} from "../events/index.js";
import {
  emptyFold,
  type RunFold,
  runMachineFor,
  statusOf,
  step,
  TransitionRejected,
} from "../machines/index.js";
import { type AnyProjection, handles, inlineProjections } from "../projections/index.js";
import { anchorLoss, type PrunedHead, prunedAnchor } from "./anchor.js";
import type { Admission, HeadAnchor, JournalReader, StoredProjectionRow } from "./Journal.js";

/** Every kind of finding, in the order docs/audit.md explains them. */
export const FINDING_KINDS = [
  "undecodable",
  "version-gap",
  "prev-hash-mismatch",
  "hash-mismatch",
  "wrong-stream",
  "unknown-machine",
  "transition-rejected",
  "outcome-without-intent",
  "replay-without-authorization",
  "duplicate-outcome",
  "decision-not-held",
  "checkpoint-mismatch",
  "result-mismatch",
  "undecryptable",
  "admission-mismatch",
  "guard-mismatch",
  "projection-rejected",
  "projection-missing",
  "projection-extra",
  "projection-different",
  "pruned-stream-present",
  "head-mismatch",
  "lost-commits",
  "anchor-damaged",
] as const;
export type FindingKind = (typeof FINDING_KINDS)[number];

/**
 * One problem. `streamId`/`version` name the event it is about; they are null only for what no
 * event names (a projection row no event produced, a head digest that differs).
 */
export interface AuditFinding {
  readonly kind: FindingKind;
  readonly streamId: string | null;
  readonly version: number | null;
  readonly detail: string;
  readonly position?: number;
  readonly projection?: string;
  readonly key?: string;
}

/** An anchor: the head digest recorded earlier, optionally as of a position (`D@P`). */
export interface ExpectedHead {
  readonly digest: string;
  /** The log position the digest was taken at; null: the digest of the log's current heads. */
  readonly position: number | null;
}

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
  readonly expectedHead: (ExpectedHead & { readonly actual: string; readonly matches: boolean }) | null;
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

/** Parse `D` or `D@P`; null when it is neither. */
export const parseExpectedHead = (text: string): ExpectedHead | null => {
  const match = /^([0-9a-f]{64})(?:@(\d+))?$/.exec(text.trim().toLowerCase());
  if (!match) return null;
  return { digest: match[1]!, position: match[2] === undefined ? null : Number(match[2]) };
};

/** A stream head as the head digest covers it. */
export interface Head {
  readonly streamId: string;
  readonly version: number;
  readonly hash: string;
}

const utf8Order = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * The head digest: sha256 (hex) of the UTF-8 text made of one line `streamId:version:hash\n` per
 * stream head, sorted by stream id in UTF-8 byte order. The empty log's digest is sha256("").
 *
 * @example
 * headDigest([{ streamId: "system", version: 1, hash: "ab…" }]);
 */
export const headDigest = (heads: Iterable<Head>): string =>
  sha256Hex(
    [...heads]
      .sort((a, b) => utf8Order(a.streamId, b.streamId))
      .map((h) => `${h.streamId}:${h.version}:${h.hash}\n`)
      .join(""),
  );

interface CallLaw {
  /** The latest attempt with an intent. */
  attempt: number;
  /** Outcomes recorded per attempt. */
  readonly outcomes: Map<number, number>;
  /** How many further attempts something authorized. */
  allowance: number;
}

interface RunTrack {
  readonly runId: string;
  /** The machine fold; null before run.admitted, or when the machine version is unknown. */
  fold: RunFold | null;
  machineKnown: boolean;
  held: boolean;
  readonly calls: Map<string, CallLaw>;
}

interface StreamState {
  /** The highest version seen and its hash: the stream's head, and what the next row must chain to. */
  version: number;
  hash: string;
  run: RunTrack | null;
  /** An event of this stream could not be opened without a key: the rest get chain checks only. */
  sealed: boolean;
}

interface RebuiltRow {
  state: unknown;
  position: number;
  streamId: string;
  version: number;
}

/** An admission the journal must hold for a `run.admitted` (the driver looks it up). */
export interface AdmissionCheck {
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  readonly digest: string;
  readonly streamId: string;
  readonly version: number;
}

const FINISHED = new Set(["completed", "failed", "stopped"]);
const SYSTEM_TYPES = new Set(["journal.opened", "retention.pruned", "backup.written"]);
const DOCUMENT_TYPES = new Set(["document.replaced", "document.conflicted"]);

export interface LogAuditorOptions {
  readonly expectHead?: ExpectedHead | null;
  readonly projections?: ReadonlyArray<AnyProjection>;
  /** Findings kept in the report; more are counted. Default 1000. */
  readonly maxFindings?: number;
  /** The keys that open encrypted fields (the journal's); null: such events get chain checks only. */
  readonly keyring?: Keyring | null;
  /** The journal's head anchor: the log must still hold the event it names (`lost-commits`). */
  readonly anchor?: HeadAnchor | null;
}

/**
 * The audit's checks, pure: fed the stored rows in position order (one page at a time), then the
 * stored caches. Holds per stream only its chain head and, for runs, the machine fold and a small
 * record per call; per projection the rebuilt rows. Never the events themselves.
 */
export class LogAuditor {
  private readonly findingsList: AuditFinding[] = [];
  private omitted = 0;
  private readonly streams = new Map<string, StreamState>();
  private readonly rebuilt = new Map<string, Map<string, RebuiltRow>>();
  private readonly rebuiltCounts = new Map<string, number>();
  private readonly pendingAdmissions: AdmissionCheck[] = [];
  private readonly prunedIds = new Set<string>();
  /** Heads removed by retention at or before the anchor position (for `D@P`). */
  private readonly anchorPruned: Head[] = [];
  private anchorHeads: Head[] | null = null;
  private readonly projections: ReadonlyArray<AnyProjection>;
  private readonly maxFindings: number;
  private readonly expectHead: ExpectedHead | null;
  private eventCount = 0;
  private runCount = 0;
  private last = 0;
  private tentative: AuditFinding[] = [];
  private rowHasFinding = false;
  private readonly keyring: Keyring | null;
  private sealedCount = 0;
  private readonly anchor: HeadAnchor | null;
  /** The hash of the event at the anchor's position, once fed. */
  private anchorFound: string | null = null;
  /** Heads retention removed after the anchored event, of the anchored event's stream. */
  private readonly anchorRemoved: PrunedHead[] = [];
  private lastRow: HeadAnchor | null = null;

  constructor(options: LogAuditorOptions = {}) {
    this.keyring = options.keyring ?? null;
    this.anchor = options.anchor ?? null;
    this.projections = options.projections ?? inlineProjections;
    this.maxFindings = options.maxFindings ?? 1000;
    this.expectHead = options.expectHead ?? null;
    for (const p of this.projections) {
      this.rebuilt.set(p.name, new Map());
      this.rebuiltCounts.set(p.name, 0);
    }
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

  private add(finding: AuditFinding): void {
    this.rowHasFinding = true;
    if (this.findingsList.length < this.maxFindings) this.findingsList.push(finding);
    else this.omitted += 1;
  }

  // ------------------------------------------------------------------ the log

  /** Check one stored row. Rows must come in position order. */
  feed(row: StoredRow): void {
    if (
      this.expectHead?.position != null &&
      this.anchorHeads === null &&
      row.position > this.expectHead.position
    )
      this.anchorHeads = this.currentHeads();
    this.eventCount += 1;
    this.last = row.position;
    this.lastRow = { position: row.position, streamId: row.streamId, version: row.version, hash: row.hash };
    if (row.position === this.anchor?.position) this.anchorFound = row.hash;
    this.rowHasFinding = false;
    const at = { streamId: row.streamId, version: row.version, position: row.position };

    let stream = this.streams.get(row.streamId);
    if (!stream) {
      stream = { version: 0, hash: GENESIS_HASH, run: null, sealed: false };
      this.streams.set(row.streamId, stream);
    }
    if (this.prunedIds.has(row.streamId))
      this.add({ ...at, kind: "pruned-stream-present", detail: "retention recorded this stream as removed" });
    this.checkChain(row, stream);
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
        stream.sealed = true;
        this.sealedCount += 1;
        return;
      }
      if (error instanceof EventDecryptError) {
        this.add({ ...at, kind: "undecryptable", detail: error.cause });
        return;
      }
      const cause = error instanceof EventDecodeError ? error.cause : String(error);
      this.add({ ...at, kind: "undecodable", detail: cause });
      return;
    }
    const event = recorded.event;
    const misplaced = this.misplaced(row.streamId, event);
    if (misplaced) this.add({ ...at, kind: "wrong-stream", detail: misplaced });
    else if (row.streamId.startsWith("run-")) this.checkRun(recorded, stream);
    else if (event.type === "retention.pruned") this.notePruned(event.streams, row.position);
    this.evolveProjections(recorded);
  }

  private checkChain(row: StoredRow, stream: StreamState): void {
    const at = { streamId: row.streamId, version: row.version, position: row.position };
    const expected = stream.version + 1;
    if (row.version !== expected) {
      this.add({
        ...at,
        kind: "version-gap",
        detail:
          row.version > expected
            ? `expected version ${expected}, found ${row.version}: ${row.version - expected} event(s) missing before it`
            : `version ${row.version} comes after version ${stream.version} in the log: events out of order or repeated`,
      });
    } else if (row.prevHash !== stream.hash) {
      this.add({ ...at, kind: "prev-hash-mismatch", detail: "prevHash is not the previous event's hash" });
    }
    if (rowHash(row) !== row.hash)
      this.add({ ...at, kind: "hash-mismatch", detail: "the stored row does not hash to its hash" });
    // A row out of order does not move the chain on: the rows after it still chain to the highest.
    if (row.version > stream.version) {
      stream.version = row.version;
      stream.hash = row.hash;
    }
  }

  /** Why an event does not belong in its stream, or null. */
  private misplaced(streamId: string, event: AnyEvent): string | null {
    if (streamId.startsWith("run-")) {
      if (!("runId" in event) || SYSTEM_TYPES.has(event.type) || DOCUMENT_TYPES.has(event.type))
        return `${event.type} does not belong in a run stream`;
      if (`run-${event.runId}` !== streamId) return `${event.type} names run ${event.runId}`;
      return null;
    }
    if (streamId.startsWith("chat-")) {
      if (!DOCUMENT_TYPES.has(event.type) || !("chatId" in event))
        return `${event.type} does not belong in a chat stream`;
      return `chat-${event.chatId}` === streamId ? null : `${event.type} names chat ${event.chatId}`;
    }
    if (streamId === "system")
      return SYSTEM_TYPES.has(event.type) ? null : `${event.type} does not belong in the system stream`;
    return "holdfast writes only run-…, chat-… and system streams";
  }

  private notePruned(
    entries: ReadonlyArray<{ streamId: string; version: number; hash: string; position: number }>,
    position: number,
  ): void {
    for (const entry of entries) {
      if (this.anchor && entry.streamId === this.anchor.streamId && position > this.anchor.position)
        this.anchorRemoved.push(entry);
      if (this.streams.has(entry.streamId)) {
        this.add({
          streamId: entry.streamId,
          version: entry.version,
          position,
          kind: "pruned-stream-present",
          detail: "retention recorded this stream as removed, but its events are still in the log",
        });
      }
      this.prunedIds.add(entry.streamId);
      const anchor = this.expectHead?.position;
      if (anchor != null && entry.position <= anchor) this.anchorPruned.push(entry);
    }
  }

  // ------------------------------------------------------------------ runs

  private checkRun(recorded: RecordedEvent, stream: StreamState): void {
    const { event } = recorded;
    const at = { streamId: recorded.streamId, version: recorded.version, position: recorded.position };
    let run = stream.run;
    if (!run) {
      run = {
        runId: recorded.streamId.slice(4),
        fold: null,
        machineKnown: true,
        held: false,
        calls: new Map(),
      };
      stream.run = run;
      this.runCount += 1;
    }
    if (event.type === "run.admitted") {
      this.pendingAdmissions.push({
        runId: event.runId,
        chatId: event.chatId,
        inputId: event.inputId,
        digest: event.inputDigest,
        streamId: recorded.streamId,
        version: recorded.version,
      });
      if (run.fold === null && run.machineKnown) {
        if (runMachineFor(event.machine)) run.fold = emptyFold(event.machine);
        else {
          run.machineKnown = false;
          this.add({
            ...at,
            kind: "unknown-machine",
            detail: `machine version "${event.machine}" is not in the registry; this holdfast cannot fold the run`,
          });
        }
      }
    }
    const law = this.checkLaws(run, event);
    if (law) this.add({ ...at, ...law });
    if (event.type === "checkpoint.saved" && digestOf(event.state) !== event.digest)
      this.add({ ...at, kind: "checkpoint-mismatch", detail: "the checkpoint does not match its digest" });
    const result =
      event.type === "call.completed"
        ? { value: event.result, digest: event.resultDigest }
        : event.type === "call.reconciled" && event.resultDigest !== undefined
          ? { value: event.result ?? null, digest: event.resultDigest }
          : null;
    // A changed row is already a hash-mismatch; the contents check speaks of rows that chain.
    if (result && !this.rowHasFinding && digestOf(result.value) !== result.digest)
      this.add({ ...at, kind: "result-mismatch", detail: "the recorded result does not match its digest" });
    if (law || !run.machineKnown) return;
    if (run.fold === null) {
      this.add({ ...at, kind: "transition-rejected", detail: "a run stream must start with run.admitted" });
      return;
    }
    try {
      run.fold = step(run.fold, event);
    } catch (error) {
      if (!(error instanceof TransitionRejected)) throw error;
      this.add({
        ...at,
        kind: "transition-rejected",
        detail: `${event.type} is not accepted in state "${error.state}" of ${run.fold.snapshot.context.machine}`,
      });
    }
  }

  /**
   * The laws across events, checked on their own, independently of the machine: no outcome
   * without intent, no new attempt without an authorization, one outcome per call attempt, no
   * decision on a run that is not held.
   */
  private checkLaws(run: RunTrack, event: AnyEvent): { kind: FindingKind; detail: string } | null {
    switch (event.type) {
      case "call.intended": {
        const call = run.calls.get(event.callId);
        if (!call) {
          run.calls.set(event.callId, { attempt: event.attempt, outcomes: new Map(), allowance: 0 });
          if (event.attempt > 1)
            return {
              kind: "replay-without-authorization",
              detail: `attempt ${event.attempt} of ${event.callId} has no earlier attempt`,
            };
          return null;
        }
        const authorized = call.allowance > 0;
        call.attempt = Math.max(call.attempt, event.attempt);
        call.allowance = Math.max(0, call.allowance - 1);
        if (!authorized)
          return {
            kind: "replay-without-authorization",
            detail: `attempt ${event.attempt} of ${event.callId} started with nothing authorizing it (replay, reconciliation, decision or retry grant)`,
          };
        return null;
      }
      case "call.completed":
      case "call.failed":
      case "call.reconciled":
      case "call.replay-authorized": {
        const call = run.calls.get(event.callId);
        if (!call || call.attempt < event.attempt)
          return {
            kind: "outcome-without-intent",
            detail: `${event.type} for attempt ${event.attempt} of ${event.callId}, which was never intended`,
          };
        if (event.type === "call.replay-authorized") {
          call.allowance = Math.max(call.allowance, 1);
          return null;
        }
        if (event.type === "call.reconciled" && event.outcome === "not-completed")
          call.allowance = Math.max(call.allowance, 1);
        return this.countOutcome(call, event.attempt, event.callId, event.type);
      }
      case "retry.granted": {
        const call = run.calls.get(event.callId);
        if (!call)
          return {
            kind: "outcome-without-intent",
            detail: `retry.granted for ${event.callId}, which was never intended`,
          };
        call.allowance = Math.max(call.allowance, event.attempts);
        return null;
      }
      case "decision.recorded": {
        if (!run.held)
          return {
            kind: "decision-not-held",
            detail: `a decision (${event.run}) on a run that was not held`,
          };
        run.held = false;
        for (const decided of event.calls) {
          const call = run.calls.get(decided.callId);
          if (!call)
            return {
              kind: "outcome-without-intent",
              detail: `the decision names ${decided.callId}, which was never intended`,
            };
          if (decided.decision === "new-attempt" || decided.decision === "confirmed-not-completed")
            call.allowance = Math.max(call.allowance, 1);
          if (decided.decision === "confirmed-completed" || decided.decision === "confirmed-not-completed") {
            const duplicate = this.countOutcome(
              call,
              call.attempt,
              decided.callId,
              `a ${decided.decision} decision`,
            );
            if (duplicate) return duplicate;
          }
        }
        return null;
      }
      case "run.held":
        run.held = true;
        return null;
      case "run.resumed":
      case "run.completed":
      case "run.failed":
      case "run.stopped":
        run.held = false;
        return null;
      default:
        return null;
    }
  }

  private countOutcome(
    call: CallLaw,
    attempt: number,
    callId: string,
    what: string,
  ): { kind: FindingKind; detail: string } | null {
    const seen = call.outcomes.get(attempt) ?? 0;
    call.outcomes.set(attempt, seen + 1);
    if (seen === 0) return null;
    return {
      kind: "duplicate-outcome",
      detail: `${what} is a second outcome for attempt ${attempt} of ${callId} (a different outcome must be a conflict.recorded)`,
    };
  }

  /** Admissions to look up in the journal, collected since the last call. */
  takeAdmissionChecks(): AdmissionCheck[] {
    return this.pendingAdmissions.splice(0);
  }

  /** The journal's admission row for a check (null: none). */
  admissionFound(check: AdmissionCheck, admission: Admission | null): void {
    const at = { streamId: check.streamId, version: check.version };
    const of = `input ${check.inputId} of chat ${check.chatId}`;
    if (!admission)
      this.add({ ...at, kind: "admission-mismatch", detail: `no admission is recorded for ${of}` });
    else if (admission.runId !== check.runId)
      this.add({
        ...at,
        kind: "admission-mismatch",
        detail: `${of} was admitted as run ${admission.runId}: this is a second run.admitted for it`,
      });
    else if (admission.digest !== check.digest)
      this.add({ ...at, kind: "admission-mismatch", detail: `the admission of ${of} has another digest` });
  }

  // ------------------------------------------------------------------ projections

  private evolveProjections(recorded: RecordedEvent): void {
    for (const projection of this.projections) {
      if (!handles(projection, recorded)) continue;
      const rows = this.rebuilt.get(projection.name)!;
      for (const key of projection.keysOf(recorded)) {
        const row = rows.get(key);
        let state: unknown;
        try {
          state = projection.evolve(row?.state, recorded, key);
        } catch (error) {
          // The write path would have refused this event; an earlier finding usually explains it.
          if (!this.rowHasFinding)
            this.add({
              streamId: recorded.streamId,
              version: recorded.version,
              position: recorded.position,
              kind: "projection-rejected",
              detail: `${projection.name}: ${error instanceof Error ? error.message : String(error)}`,
              projection: projection.name,
              key,
            });
          continue;
        }
        if (!row) this.rebuiltCounts.set(projection.name, this.rebuiltCounts.get(projection.name)! + 1);
        rows.set(key, {
          state,
          position: recorded.position,
          streamId: recorded.streamId,
          version: recorded.version,
        });
      }
    }
  }

  /**
   * Compare a page of a projection's stored rows with the rebuilt ones. A stored row newer than
   * the audited log is only a finding if the log did not move meanwhile (decided in `finish`).
   */
  compareStored(name: string, stored: ReadonlyArray<StoredProjectionRow>): void {
    const rows = this.rebuilt.get(name);
    if (!rows) return;
    for (const row of stored) {
      const mine = rows.get(row.key);
      const ahead = row.position > this.last;
      if (!mine) {
        const finding: AuditFinding = {
          streamId: null,
          version: null,
          position: row.position,
          kind: "projection-extra",
          detail: ahead
            ? `a stored row claims position ${row.position}, beyond the end of the log (${this.last})`
            : "a stored row that no event produces",
          projection: name,
          key: row.key,
        };
        if (ahead) this.tentative.push(finding);
        else this.add(finding);
        continue;
      }
      rows.delete(row.key);
      const difference = describeDifference(mine, row);
      if (!difference) continue;
      const finding: AuditFinding = {
        streamId: mine.streamId,
        version: mine.version,
        position: mine.position,
        kind: "projection-different",
        detail: difference,
        projection: name,
        key: row.key,
      };
      if (ahead) this.tentative.push(finding);
      else this.add(finding);
    }
  }

  /** After every stored page of a projection: rebuilt rows never seen are missing. */
  endProjection(name: string): void {
    const rows = this.rebuilt.get(name);
    if (!rows) return;
    for (const [key, mine] of rows) {
      this.add({
        streamId: mine.streamId,
        version: mine.version,
        position: mine.position,
        kind: "projection-missing",
        detail: "the events produce this row, but it is not stored",
        projection: name,
        key,
      });
    }
    rows.clear();
  }

  // ------------------------------------------------------------------ the end

  private currentHeads(): Head[] {
    const heads: Head[] = [];
    for (const [streamId, s] of this.streams) heads.push({ streamId, version: s.version, hash: s.hash });
    return heads;
  }

  /**
   * Runs whose active-run guard disagrees with their fold; `stillAt` says whether a run's stream
   * is still at the audited version (a run that moved during the audit is not a finding).
   */
  guardMismatches(activeRunIds: ReadonlySet<string>): Array<AuditFinding & { readonly runId: string }> {
    const found: Array<AuditFinding & { readonly runId: string }> = [];
    const known = new Set<string>();
    for (const [streamId, s] of this.streams) {
      // A run read without its key: known, but its status is not.
      if (s.sealed && streamId.startsWith("run-")) known.add(streamId.slice("run-".length));
      const run = s.run;
      if (!run || s.sealed) continue;
      known.add(run.runId);
      if (!run.fold) continue;
      const status = statusOf(run.fold);
      const finished = FINISHED.has(status);
      const active = activeRunIds.has(run.runId);
      if (finished === !active) continue;
      found.push({
        runId: run.runId,
        streamId,
        version: s.version,
        kind: "guard-mismatch",
        detail: finished
          ? `the run is ${status} but the active-run guard still marks it active (its chat refuses new input)`
          : `the run is ${status} but the active-run guard marks it finished (its chat would accept new input)`,
      });
    }
    for (const runId of activeRunIds) {
      if (known.has(runId)) continue;
      found.push({
        runId,
        streamId: `run-${runId}`,
        version: null,
        kind: "guard-mismatch",
        detail: this.prunedIds.has(`run-${runId}`)
          ? "retention removed this run, but the active-run guard still marks it active"
          : "the active-run guard marks this run active, but the log has no such run",
      });
    }
    return found;
  }

  /** Record findings the driver confirmed (guard mismatches still true after re-reading). */
  confirm(findings: ReadonlyArray<AuditFinding>): void {
    for (const f of findings) this.add(f);
  }

  /** Close the audit. `moved`: events were appended after the audited log ended. */
  finish(moved: boolean): AuditReport {
    if (!moved) for (const f of this.tentative) this.add(f);
    this.tentative = [];
    const headDigestValue = headDigest(this.currentHeads());
    let expected: AuditReport["expectedHead"] = null;
    if (this.expectHead) {
      const { digest, position } = this.expectHead;
      let actual = headDigestValue;
      if (position !== null) {
        const atAnchor = new Map((this.anchorHeads ?? this.currentHeads()).map((h) => [h.streamId, h]));
        for (const h of this.anchorPruned) if (!atAnchor.has(h.streamId)) atAnchor.set(h.streamId, h);
        actual = position > this.last && this.anchorHeads === null ? "" : headDigest(atAnchor.values());
      }
      const matches = actual === digest;
      expected = { digest, position, actual, matches };
      if (!matches)
        this.add({
          streamId: null,
          version: null,
          kind: "head-mismatch",
          detail:
            position === null
              ? `the head digest is ${headDigestValue}, not the expected ${digest}: an event was removed from the end of a stream, or events were appended since the digest was taken (anchor with D@P to allow appends)`
              : actual === ""
                ? `the log ends at position ${this.last}, before the anchor's position ${position}: its tail was removed`
                : `the heads as of position ${position} hash to ${actual}, not the expected ${digest}: an event at or before that position was removed or changed (or a run active then was pruned since)`,
        });
    }
    let anchor: AuditReport["anchor"] = null;
    if (this.anchor) {
      const loss = anchorLoss(
        this.anchor,
        this.anchorFound,
        this.last,
        prunedAnchor(this.anchor, this.anchorRemoved),
      );
      anchor = { ...this.anchor, holds: loss === null };
      if (loss)
        this.add({
          streamId: this.anchor.streamId || null,
          version: this.anchor.streamId ? this.anchor.version : null,
          position: this.anchor.position,
          kind: "lost-commits",
          detail: loss,
        });
    }
    const projections = this.projections.map((p) => ({
      name: p.name,
      rows: this.rebuiltCounts.get(p.name)!,
    }));
    return {
      clean: this.findingsList.length === 0 && this.omitted === 0,
      findings: this.findingsList,
      findingsOmitted: this.omitted,
      events: this.eventCount,
      streams: this.streams.size,
      runs: this.runCount,
      lastPosition: this.last,
      headDigest: headDigestValue,
      projections,
      prunedStreams: this.prunedIds.size,
      expectedHead: expected,
      movedDuringAudit: moved,
      sealedUnchecked: this.sealedCount,
      anchor,
      lastEvent: this.lastRow,
    };
  }
}

const normalize = (value: unknown): string => canonicalJson(JSON.parse(JSON.stringify(value ?? null)));

const describeDifference = (mine: RebuiltRow, stored: StoredProjectionRow): string | null => {
  let storedValue: string;
  try {
    storedValue = canonicalJson(JSON.parse(stored.value));
  } catch {
    return "the stored row is not JSON";
  }
  const fields: string[] = [];
  if (normalize(mine.state) !== storedValue) {
    const rebuilt = JSON.parse(normalize(mine.state)) as Record<string, unknown>;
    const kept = JSON.parse(storedValue) as Record<string, unknown>;
    const names =
      rebuilt && kept && typeof rebuilt === "object" && typeof kept === "object"
        ? [...new Set([...Object.keys(rebuilt), ...Object.keys(kept)])].filter(
            (k) => canonicalJson(rebuilt[k] ?? null) !== canonicalJson(kept[k] ?? null),
          )
        : [];
    fields.push(names.length > 0 ? `fields ${names.join(", ")} differ` : "the value differs");
  }
  if (mine.position !== stored.position)
    fields.push(`stored position ${stored.position}, rebuilt ${mine.position}`);
  return fields.length > 0 ? `the stored row differs from the rebuilt one: ${fields.join("; ")}` : null;
};

export interface AuditOptions {
  /** Report a finding when the head digest (or the heads as of a position) differs. */
  readonly expectHead?: ExpectedHead | null;
  /** Events read per page (default 1000): memory holds one page of events at a time. */
  readonly pageSize?: number;
  /** Called every `progressEvery` events (default 10 000) with the count so far. */
  readonly onProgress?: (events: number) => void;
  readonly progressEvery?: number;
  readonly maxFindings?: number;
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
  const pageSize = options.pageSize ?? 1000;
  const every = options.progressEvery ?? 10_000;
  // Read before the log: the anchor names a committed event, so a log read afterwards holds it.
  const anchor = journal.headAnchor ? await journal.headAnchor() : { kind: "none" as const };
  const auditor = new LogAuditor({
    expectHead: options.expectHead ?? null,
    keyring: journal.keyring,
    anchor: anchor.kind === "anchored" ? anchor.anchor : null,
    ...(options.maxFindings === undefined ? {} : { maxFindings: options.maxFindings }),
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
    const last = page.at(-1);
    if (!last) break;
    after = last.position;
    if (options.onProgress && auditor.events >= nextProgress) {
      options.onProgress(auditor.events);
      nextProgress = (Math.floor(auditor.events / every) + 1) * every;
    }
    if (page.length < pageSize) break;
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
  const moved = (await journal.readAllRows({ after: auditor.lastPosition, limit: 1 })).length > 0;
  return auditor.finish(moved);
};
