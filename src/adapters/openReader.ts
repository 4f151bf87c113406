import type { RecordedEvent } from "../events/index.js";
import { runStreamId } from "../events/index.js";
import { type CallRow, callsOfRun, type RunRow } from "../projections/index.js";
import type { AuditOptions, AuditReport } from "../runtime/audit.js";
import { type ChatCheckpoint, readCheckpoint } from "../runtime/checkpoint.js";
import { type DocumentState, PLAN, readDocument } from "../runtime/documents.js";
import type { AlertRecord } from "../runtime/Journal.js";
import { type SubscribeOptions, subscribe } from "../runtime/subscribe.js";
import { auditStore } from "./auditStore.js";
import { openStoreReader } from "./store.js";

/** What `openReader` opens. */
export interface ReaderOptions {
  /** The journal: a file path or a `postgres://` URL (default `HOLDFAST_STORE`, else `.holdfast/journal.db`). */
  readonly store?: string;
  /**
   * Check at open that the payload keys read this journal (default true). `false` lets an auditor
   * without `HOLDFAST_ENCRYPTION_KEY` open an encrypted journal: its chains still verify.
   */
  readonly keyCheck?: boolean;
}

/**
 * A read-only view of a journal, for watchers, auditors and operators' screens (and the HTTP
 * server's reads): it never writes, claims runs, runs recovery or checkpoints, so it is safe on a
 * journal live workers are using and on an evidence copy alike.
 */
export interface Reader {
  readonly engine: string;
  /** Where the journal is (printable). */
  readonly location: string;
  /** Every event after `after`, then live ones as they commit: no gap, no duplicate. */
  subscribe(options?: SubscribeOptions): AsyncIterableIterator<RecordedEvent>;
  /** Verify the whole log; see docs/audit.md. Lost commits are a finding (`lost-commits`). */
  audit(options?: AuditOptions): Promise<AuditReport>;
  /** Status per run (the runs projection). */
  runs(): Promise<ReadonlyArray<RunRow>>;
  /**
   * Alerts the journal recorded (decision 0065), newest first, each with every delivery attempt;
   * `undelivered: true` lists those still tried or given up on ("not delivered after N tries").
   * @example
   * for (const a of await reader.alerts({ undelivered: true })) console.log(a.runId, a.attempts, a.lastError);
   */
  alerts(options?: {
    readonly undelivered?: boolean;
    readonly limit?: number;
  }): Promise<ReadonlyArray<AlertRecord>>;
  /** One run's row, or null when the journal has no such run. */
  run(runId: string): Promise<RunRow | null>;
  /** The events of one run, decoded. */
  events(runId: string): Promise<ReadonlyArray<RecordedEvent>>;
  /**
   * One run's calls in program order, folded from its events: status, attempt, and whether the
   * outcome is committed. Empty when the journal has no such run.
   */
  calls(runId: string): Promise<ReadonlyArray<CallRow>>;
  /** The chat's latest checkpoint, or null; `CheckpointInvalid` when it does not match its digest. */
  checkpoint(chatId: string): Promise<ChatCheckpoint | null>;
  /** Per-chat documents, read only (the plan is `"plan"`). */
  readonly documents: {
    read(chatId: string, document?: string): Promise<DocumentState>;
  };
  close(): Promise<void>;
}

/**
 * Open an existing journal read-only. A missing or empty file, another database or another schema
 * version is refused (`JournalUnavailable`, `JournalTooNew`) and nothing is created or changed.
 *
 * @example
 * const reader = await openReader({ store: "/evidence/journal.db" });
 * const report = await reader.audit();
 * for await (const e of reader.subscribe({ after: report.lastPosition })) console.log(e.event.type);
 * await reader.close();
 */
export const openReader = async (options: ReaderOptions = {}): Promise<Reader> => {
  const keyCheck = options.keyCheck === false ? { keyCheck: false } : {};
  const journal = await openStoreReader(options.store, { libsql: keyCheck, postgres: keyCheck });
  return {
    engine: journal.engine,
    location: journal.location,
    subscribe: (subscription) => subscribe(journal, subscription),
    audit: (auditOptions) => auditStore(journal, auditOptions),
    runs: () => journal.projectionRows<RunRow>("runs"),
    alerts: (alertOptions) => journal.alerts(alertOptions),
    run: (runId) => journal.projection<RunRow>("runs", runId),
    events: (runId) => journal.readStream(runStreamId(runId)),
    calls: async (runId) => callsOfRun(await journal.readStream(runStreamId(runId))),
    checkpoint: (chatId) => readCheckpoint(journal, chatId),
    documents: { read: (chatId, document = PLAN) => readDocument(journal, chatId, document) },
    close: () => journal.close(),
  };
};
