import { accessSync, closeSync, constants, existsSync, mkdirSync, openSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "libsql";
import { decodeRow, type Keyring, type RecordedEvent, type StoredRow } from "../../../events/index.js";
import { inlineProjections } from "../../../projections/index.js";
import { crashPoint } from "../../../runtime/crash.js";
import { JournalClosed, JournalUnavailable } from "../../../runtime/errors.js";
import type {
  Admission,
  AlertCounts,
  AlertRecord,
  AnchorReading,
  AppendRequest,
  AppendResult,
  Claim,
  ClaimOptions,
  CommitOrigin,
  DroppedStream,
  DueSchedule,
  DueWait,
  HeadAnchor,
  Journal,
  JournalReader,
  LivenessSnapshot,
  NewAlert,
  ProjectionRebuild,
  PrunedRunRecord,
  PruneOptions,
  PruneReport,
  RetentionPolicy,
  RunSearch,
  RunSearchResult,
  RuntimeAnnouncement,
  StoredProjectionRow,
  StreamHead,
} from "../../../runtime/Journal.js";
import { keyringFromEnv } from "../../keys.js";
import {
  alertAttemptedProgram,
  alertCountsProgram,
  alertsProgram,
  claimAlertsProgram,
  recordAlertsProgram,
} from "../sql/alerts.js";
import { appendAllProgram } from "../sql/append.js";
import {
  type ClaimResult,
  claimManyProgram,
  claimProgram,
  releaseProgram,
  renewProgram,
  takeOverOf,
} from "../sql/claims.js";
import { keyCheckProgram } from "../sql/keys.js";
import {
  dropStreamProgram,
  openStoredProjection,
  type ProjectionRowSql,
  projectionPageProgram,
  pruneInBatches,
  rebuildProgram,
} from "../sql/maintenance.js";
import { type Program, runSync, type SqlStep, type UniqueKey, UniqueViolation } from "../sql/program.js";
import {
  type AdmissionRow,
  type ClaimRow,
  type DueScheduleRow,
  type DueWaitRow,
  dueScheduleOf,
  dueWaitOf,
  type EventRow,
  type HeadRow,
  type PrunedRunRow,
  toAdmission,
  toClaim,
  toPrunedRun,
  toStored,
} from "../sql/rows.js";
import { announceProgram, livenessProgram, withdrawProgram } from "../sql/runtimes.js";
import {
  countRunsProgram,
  fillSearchProgram,
  searchRunsProgram,
  searchUnfilledProgram,
  warnUnreadable,
} from "../sql/search.js";
import { libsqlDialect, statements } from "../sql/statements.js";
import { AnchorKeeper, readAnchor } from "./anchor.js";
import { refuseVanishedJournal, verifyAnchor } from "./anchorCheck.js";
import { ownerOnly } from "./fileMode.js";
import type { LibsqlJournalOptions, LibsqlReaderOptions } from "./options.js";
import { CACHE_KIB, prepareJournalFile } from "./prepareFile.js";
import { checkReadableFile, readableJournalKey, readOnlyUri } from "./readOnly.js";
import { damageOf, STORAGE_HINT, sqliteCode, storageFailureOf } from "./sqlite.js";

type Db = InstanceType<typeof Database>;

/** A prepared statement, bound positionally. */
interface Stmt {
  get(...params: ReadonlyArray<unknown>): unknown;
  all(...params: ReadonlyArray<unknown>): unknown[];
  run(...params: ReadonlyArray<unknown>): unknown;
}

export type { LibsqlJournalOptions, LibsqlReaderOptions } from "./options.js";

interface Pending {
  readonly requests: ReadonlyArray<AppendRequest>;
  readonly resolve: (results: AppendResult[]) => void;
  readonly reject: (error: unknown) => void;
}

/** Giving up on a lock after this long surfaces a clear error instead of SQLITE_BUSY. */
const LOCK_GIVE_UP_MS = 60_000;

const isBusy = (error: unknown): boolean => sqliteCode(error).startsWith("SQLITE_BUSY");

/**
 * The pause before trying a taken lock again: a few milliseconds at first, so a lock freed soon is
 * taken soon, growing to about 100 ms; randomized, so processes waiting together do not retry in step.
 */
const lockBackoff = (attempt: number): number => Math.min(100, 4 * 2 ** attempt) * (0.5 + Math.random());

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The embedded journal on one libSQL file: WAL, `synchronous=FULL`, appends group-committed.
 * Safe for several processes on the same file (SQLite's locks, `BEGIN IMMEDIATE`, busy timeout).
 */
/** The heads of a list of streams (a JSON array of ids), in one statement. */
const STREAM_HEADS =
  "SELECT e.stream_id, e.version, e.hash FROM events e JOIN (SELECT stream_id, MAX(version) AS version FROM events WHERE stream_id IN (SELECT value FROM json_each(?)) GROUP BY stream_id) h ON e.stream_id = h.stream_id AND e.version = h.version";

export class LibsqlJournal implements Journal {
  readonly engine = "libsql";
  readonly location: string;
  readonly fingerprintKey: Uint8Array;
  readonly keyring: Keyring | null;
  private readonly db: Db;
  private queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  private readonly committedListeners = new Set<(origin: CommitOrigin) => void>();
  private readonly onBeforeCommit: (() => void) | undefined;
  private readonly prepared = new Map<string, Stmt>();
  private readonly lockWaitMs: number;
  /** Writes waiting for another process's lock: close() lets them finish first. */
  private lockWaiters = 0;
  /** Opened read-only: never writes, checkpoints or keeps the anchor. */
  private readonly readOnly: boolean;
  private anchor: AnchorKeeper | null = null;
  private readonly checkpointEveryMs: number;
  private lastCheckpoint = performance.now();
  private checkpointDue: ReturnType<typeof setTimeout> | undefined;

  private constructor(
    db: Db,
    location: string,
    key: Uint8Array,
    keyring: Keyring | null,
    options: LibsqlJournalOptions,
    readOnly = false,
  ) {
    this.db = db;
    this.location = location;
    this.fingerprintKey = key;
    this.keyring = keyring;
    this.onBeforeCommit = options.onBeforeCommit;
    this.lockWaitMs = options.lockWaitMs ?? LOCK_GIVE_UP_MS;
    this.readOnly = readOnly;
    this.checkpointEveryMs = Math.max(0, options.checkpointEveryMs ?? 5000);
  }

  /** Open (creating when absent) a journal file; checks the file, applies migrations. */
  static open(path: string, options: LibsqlJournalOptions = {}): LibsqlJournal {
    const location = resolve(path);
    const folder = dirname(location);
    const unavailable = (reason: string, hint: string) => new JournalUnavailable({ location, reason, hint });

    // Lost commits are refused before a writing connection touches the file (decision 0012); a
    // journal whose file vanished, before a fresh one could be made in its place.
    refuseVanishedJournal(location);
    verifyAnchor(location);
    if (!existsSync(folder)) {
      if (!options.createFolder) {
        throw unavailable(
          `the folder ${folder} does not exist`,
          "Create the folder, or pass another path with --db.",
        );
      }
      mkdirSync(folder, { recursive: true, mode: 0o700 });
    }
    if (existsSync(location)) {
      if (statSync(location).isDirectory()) {
        throw unavailable(
          "the path is a folder, not a file",
          "Pass the path of a journal file, e.g. --db ./journal.db.",
        );
      }
      try {
        accessSync(location, constants.R_OK | constants.W_OK);
        accessSync(folder, constants.W_OK);
      } catch {
        throw unavailable(
          "the file or its folder is not writable",
          "holdfast needs write access to the file and its folder (for the WAL); fix permissions or copy the journal.",
        );
      }
    } else {
      try {
        accessSync(folder, constants.W_OK);
        // Created here, before SQLite sees it, so the journal (and its WAL, which inherits the mode) is 0600.
        closeSync(openSync(location, "wx", 0o600));
      } catch {
        throw unavailable(
          `the folder ${folder} is not writable`,
          "Choose a writable folder with --db, or fix its permissions.",
        );
      }
    }

    ownerOnly(location);

    let db: Db;
    try {
      db = new Database(location, { timeout: options.busyTimeoutMs ?? 5000 });
    } catch (cause) {
      throw unavailable(`cannot be opened (${String(cause)})`, "Check the path and permissions.");
    }
    try {
      const keyring = keyringFromEnv(options.env ?? process.env, location);
      const key = prepareJournalFile(db, location, options);
      const journal = new LibsqlJournal(db, location, key, keyring, options);
      if (options.keyCheck !== false) journal.runProgram(keyCheckProgram(SQL, keyring));
      if (keyring) journal.fillSearch(keyring);
      journal.anchor = LibsqlJournal.keepAnchor(db, location);
      // From here SQLite never waits for a lock inside a call, which would stop the event loop:
      // the journal retries on timers instead (F10).
      db.pragma("busy_timeout = 0");
      return journal;
    } catch (error) {
      db.close();
      // A full disk or failing storage while the file is set up (turning WAL on writes the first
      // page of a new or empty file, a migration writes its tables) says so, as an append would.
      const reason = storageFailureOf(error);
      if (reason) throw unavailable(reason, STORAGE_HINT);
      throw error;
    }
  }

  /**
   * Open an existing journal read-only, for watchers, auditors and operators' views: no migration,
   * no PRAGMA that writes, no integrity check, no checkpoint, no anchor update, nothing created.
   * A missing or empty file, another database, or another schema version is `JournalUnavailable`
   * (`JournalTooNew` for a newer one), and nothing is changed.
   */
  static openReadOnly(path: string, options: LibsqlReaderOptions = {}): JournalReader {
    const location = resolve(path);
    checkReadableFile(location);
    let db: Db;
    try {
      db = new Database(readOnlyUri(location), { timeout: options.busyTimeoutMs ?? 5000 });
    } catch (cause) {
      throw new JournalUnavailable({
        location,
        reason: `cannot be opened read-only (${String(cause)})`,
        hint: "Check the path and permissions.",
      });
    }
    try {
      db.pragma(`busy_timeout = ${Math.max(5000, options.busyTimeoutMs ?? 5000)}`);
      db.pragma("query_only = ON");
      const key = readableJournalKey(db, location);
      db.pragma(`cache_size = -${Math.max(256, Math.floor(options.cacheKib ?? CACHE_KIB))}`);
      const keyring = keyringFromEnv(options.env ?? process.env, location);
      const journal = new LibsqlJournal(db, location, key, keyring, options, true);
      if (options.keyCheck !== false) journal.runProgram(keyCheckProgram(SQL, keyring));
      return journal;
    } catch (error) {
      db.close();
      const reason = damageOf(error);
      if (!reason) throw error;
      throw new JournalUnavailable({
        location,
        reason,
        hint: "Keep the file as evidence; restore the journal with its -wal file from a copy or the latest backup (holdfast backup).",
      });
    }
  }

  /** The anchor kept from now on; made at the journal's last event when it has none (an older journal). */
  private static keepAnchor(db: Db, location: string): AnchorKeeper {
    const last = db
      .prepare("SELECT position, stream_id, version, hash FROM events ORDER BY position DESC LIMIT 1")
      .get() as { position: number; stream_id: string; version: number; hash: string } | undefined;
    try {
      return AnchorKeeper.open(
        location,
        last
          ? {
              position: Number(last.position),
              streamId: last.stream_id,
              version: Number(last.version),
              hash: last.hash,
            }
          : null,
      );
    } catch (cause) {
      throw new JournalUnavailable({
        location,
        reason: `its head anchor cannot be kept (${cause instanceof Error ? cause.message : String(cause)})`,
        hint: "holdfast keeps journal.db-anchor next to the journal file: make the folder writable.",
      });
    }
  }

  // ---------------------------------------------------------------- append (group commit)

  append(request: AppendRequest): Promise<AppendResult> {
    return this.appendAll([request]).then((results) => results[0]!);
  }

  appendAll(requests: ReadonlyArray<AppendRequest>): Promise<AppendResult[]> {
    if (this.closed) return Promise.reject(new JournalClosed({ location: this.location }));
    return new Promise((resolvePromise, reject) => {
      this.queue.push({ requests, resolve: resolvePromise, reject });
      this.schedule(0);
    });
  }

  private schedule(delayMs: number, startedAt = performance.now(), attempt = 0): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      this.flush(startedAt, attempt);
    };
    if (delayMs === 0) setImmediate(run);
    else setTimeout(run, delayMs);
  }

  /**
   * Commit everything queued so far in one transaction. Each request runs in a savepoint, so one
   * refused request (wrong version, active run) does not sink the others. Callers resolve only
   * after the COMMIT that holds their events.
   */
  private flush(startedAt: number, attempt = 0): void {
    if (this.queue.length === 0) return;
    try {
      this.db.exec("BEGIN IMMEDIATE");
    } catch (error) {
      if (isBusy(error) && performance.now() - startedAt < this.lockWaitMs) {
        this.schedule(lockBackoff(attempt), startedAt, attempt + 1);
        return;
      }
      const failure = isBusy(error) ? this.lockNotTaken(error) : this.storageFailed(error);
      for (const p of this.queue.splice(0)) p.reject(failure);
      return;
    }
    const batch = this.queue.splice(0);
    const outcomes: Array<{ ok: AppendResult[] } | { error: unknown }> = [];
    // A request alone needs no savepoint: if it fails, the whole transaction is rolled back.
    const savepoints = batch.length > 1;
    try {
      for (const pending of batch) {
        if (savepoints) this.db.exec("SAVEPOINT append_one");
        try {
          outcomes.push({ ok: this.applyAll(pending.requests) });
          if (savepoints) this.db.exec("RELEASE append_one");
        } catch (error) {
          // The storage failing sinks the whole batch (SQLite may have rolled it back already).
          if (storageFailureOf(error)) throw error;
          if (savepoints) {
            this.db.exec("ROLLBACK TO append_one");
            this.db.exec("RELEASE append_one");
          }
          outcomes.push({ error });
        }
      }
      if (outcomes.some((o) => "ok" in o)) {
        this.onBeforeCommit?.();
        crashPoint("mid-group-commit");
        this.db.exec("COMMIT");
      } else {
        this.db.exec("ROLLBACK");
      }
    } catch (error) {
      this.rollbackQuietly();
      const failure = this.storageFailed(error);
      for (const p of batch) p.reject(failure);
      return;
    }
    this.committed(outcomes);
    if (outcomes.some((o) => "ok" in o)) for (const listener of this.committedListeners) listener("here");
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      if ("ok" in outcome) pending.resolve(outcome.ok);
      else pending.reject(outcome.error);
    });
  }

  /**
   * After a COMMIT (never before: the anchor must only name durable events): move the head anchor
   * to the batch's last event, and copy the WAL into the file when it is time.
   */
  private committed(outcomes: ReadonlyArray<{ ok: AppendResult[] } | { error: unknown }>): void {
    let last: HeadAnchor | null = null;
    for (const outcome of outcomes) {
      if (!("ok" in outcome)) continue;
      for (const result of outcome.ok) {
        const event = result.recorded.at(-1);
        if (event && (!last || event.position > last.position))
          last = {
            position: event.position,
            streamId: event.streamId,
            version: event.version,
            hash: event.hash,
          };
      }
    }
    if (!last) return;
    this.advanceAnchor(last);
    this.scheduleCheckpoint();
  }

  private advanceAnchor(head: HeadAnchor): void {
    try {
      this.anchor?.advance(head);
    } catch {
      // The commit stands; an anchor left behind only lags (decision 0012), it never lies.
    }
  }

  /** A PASSIVE checkpoint waits for nobody; after a burst of commits it runs once, off the commit path. */
  private scheduleCheckpoint(): void {
    if (this.checkpointDue || this.readOnly) return;
    const wait = Math.max(0, this.lastCheckpoint + this.checkpointEveryMs - performance.now());
    this.checkpointDue = setTimeout(() => {
      this.checkpointDue = undefined;
      if (this.closed) return;
      this.lastCheckpoint = performance.now();
      try {
        this.db.pragma("wal_checkpoint(PASSIVE)");
      } catch {
        // Busy or failing now: the next commit schedules another, and close() checkpoints.
      }
    }, wait);
    this.checkpointDue.unref();
  }

  private applyAll(requests: ReadonlyArray<AppendRequest>): AppendResult[] {
    return this.runProgram(appendAllProgram(SQL, requests, inlineProjections, this.keyring));
  }

  /** Run a shared write program on this connection (the caller holds the write transaction). */
  /**
   * Index the sealed runs rows the run index migration could not read (decision 0073), once, with
   * the key; a row the key does not open is left for `holdfast rebuild`, which says why.
   */
  private fillSearch(keyring: Keyring): void {
    if (!this.runProgram(searchUnfilledProgram())) return;
    this.db.exec("BEGIN IMMEDIATE");
    let unreadable: ReadonlyArray<string>;
    try {
      unreadable = this.runProgram(fillSearchProgram(keyring, 1)).unreadable;
      this.db.exec("COMMIT");
    } catch (error) {
      this.db.exec("ROLLBACK");
      throw error;
    }
    warnUnreadable(this.location, unreadable);
  }

  private runProgram<T>(program: Program<T>): T {
    return runSync(program, (step) => this.execute(step));
  }

  private execute(step: SqlStep): unknown {
    if (step.kind === "now") return Date.now();
    const stmt = this.statement(step.sql);
    try {
      if (step.kind === "get") return stmt.get(...step.params);
      if (step.kind === "all") return stmt.all(...step.params);
      stmt.run(...step.params);
      return undefined;
    } catch (error) {
      const key = uniqueKeyOf(error);
      throw key ? new UniqueViolation(key, String((error as Error).message)) : error;
    }
  }

  private statement(sql: string): Stmt {
    let stmt = this.prepared.get(sql);
    if (!stmt) {
      stmt = this.db.prepare(sql) as Stmt;
      this.prepared.set(sql, stmt);
    }
    return stmt;
  }

  // ---------------------------------------------------------------- reads

  /** Called after every commit that wrote events (this process only; others are seen by polling). */
  onCommitted(listener: (origin: CommitOrigin) => void): () => void {
    this.committedListeners.add(listener);
    return () => this.committedListeners.delete(listener);
  }

  async readStream(
    streamId: string,
    options: { readonly afterVersion?: number } = {},
  ): Promise<ReadonlyArray<RecordedEvent>> {
    const { afterVersion } = options;
    const rows = await this.read(() =>
      afterVersion === undefined
        ? this.rows<EventRow>(SQL.stream, streamId)
        : this.rows<EventRow>(SQL.streamAfter, streamId, afterVersion),
    );
    return rows.map((row) => decodeRow(toStored(row), this.keyring));
  }

  async readStreamRows(streamId: string): Promise<ReadonlyArray<StoredRow>> {
    return (await this.read(() => this.rows<EventRow>(SQL.stream, streamId))).map(toStored);
  }

  async readAll(options: {
    readonly after: number;
    readonly limit: number;
  }): Promise<ReadonlyArray<RecordedEvent>> {
    return (await this.rawRows(options)).map((row) => decodeRow(row, this.keyring));
  }

  /** Raw rows, undecoded: for the audit, which must see what is stored even when it does not decode. */
  async readAllRows(options: { readonly after: number; readonly limit: number }): Promise<StoredRow[]> {
    return this.rawRows(options);
  }

  private async rawRows(options: { readonly after: number; readonly limit: number }): Promise<StoredRow[]> {
    return (await this.read(() => this.rows<EventRow>(SQL.all, options.after, options.limit))).map(toStored);
  }

  async projectionPage(
    name: string,
    options: { readonly after: string | null; readonly limit: number },
  ): Promise<ReadonlyArray<StoredProjectionRow>> {
    return this.read(() =>
      this.runProgram(projectionPageProgram(name, options.after, options.limit, this.keyring)),
    );
  }

  // ---------------------------------------------------------------- maintenance

  async rebuildProjections(): Promise<ReadonlyArray<ProjectionRebuild>> {
    return this.writeTransaction(() =>
      this.runProgram(rebuildProgram(SQL, inlineProjections, null, this.keyring)),
    );
  }

  async prune(policy: RetentionPolicy & PruneOptions): Promise<PruneReport> {
    this.assertOpen();
    return pruneInBatches(
      {
        // The selection and each batch's checks read one snapshot each and take no write lock.
        read: (program) => this.read(() => this.readTransaction(() => this.runProgram(program))),
        write: async (program) => {
          const started = performance.now();
          const batch = await this.writeTransaction(() => this.runProgram(program));
          const held = performance.now() - started;
          if (batch.recorded) await this.anchorAtLastEvent();
          // SQLite's write lock is no queue: another process waiting for it polls (lockBackoff),
          // and so do this process's heartbeats on their timers. A pause as long as the batch
          // held the lock gives every waiter a fair chance before the next batch takes it.
          await sleep(Math.max(1, held));
          return batch;
        },
      },
      SQL,
      inlineProjections,
      null,
      policy,
      this.keyring,
    );
  }

  /** Move the head anchor to the log's last event (after a commit that removed or recorded events). */
  private async anchorAtLastEvent(): Promise<void> {
    const last = await this.read(() => this.row<EventRow>(SQL.lastEvent));
    if (!last) return;
    const event = toStored(last);
    this.advanceAnchor({
      position: event.position,
      streamId: event.streamId,
      version: event.version,
      hash: event.hash,
    });
  }

  async dropStream(streamId: string): Promise<DroppedStream | null> {
    this.assertOpen();
    const dropped = await this.writeTransaction(() =>
      this.runProgram(dropStreamProgram(SQL, inlineProjections, null, streamId, this.keyring, Date.now())),
    );
    if (dropped) {
      await this.anchorAtLastEvent();
    }
    return dropped;
  }

  async streamHead(streamId: string): Promise<StreamHead | null> {
    const head = await this.read(() => this.row<HeadRow>(SQL.head, streamId));
    return head ? { streamId, version: Number(head.version), hash: head.hash } : null;
  }

  async streamHeads(streamIds: ReadonlyArray<string>): Promise<ReadonlyArray<StreamHead>> {
    if (streamIds.length === 0) return [];
    const rows = await this.read(() =>
      this.rows<HeadRow & { stream_id: string }>(STREAM_HEADS, JSON.stringify(streamIds)),
    );
    return rows.map((row) => ({ streamId: row.stream_id, version: Number(row.version), hash: row.hash }));
  }

  async admission(chatId: string, inputId: string): Promise<Admission | null> {
    const row = await this.read(() => this.row<AdmissionRow>(SQL.admission, chatId, inputId));
    return row ? toAdmission(row) : null;
  }

  async prunedRun(runId: string): Promise<PrunedRunRecord | null> {
    const row = await this.read(() => this.row<PrunedRunRow>(SQL.prunedRun, runId));
    return row ? toPrunedRun(row) : null;
  }

  async activeRun(chatId: string): Promise<string | null> {
    return (await this.read(() => this.row<{ run_id: string }>(SQL.activeRun, chatId)))?.run_id ?? null;
  }

  async activeRuns(): Promise<ReadonlyArray<string>> {
    return (await this.read(() => this.rows<{ run_id: string }>(SQL.activeRuns))).map((r) => r.run_id);
  }

  async queuePending(): Promise<ReadonlyArray<{ readonly chatId: string; readonly pending: number }>> {
    return (await this.read(() => this.rows<{ chat_id: string; pending: number }>(SQL.queuePending))).map(
      (r) => ({ chatId: r.chat_id, pending: Number(r.pending) }),
    );
  }

  async dueWaits(nowMs: number, limit: number): Promise<ReadonlyArray<DueWait>> {
    return (await this.read(() => this.rows<DueWaitRow>(SQL.dueWaits, nowMs, limit))).map(dueWaitOf);
  }

  async dueSchedules(nowMs: number, limit: number): Promise<ReadonlyArray<DueSchedule>> {
    return (await this.read(() => this.rows<DueScheduleRow>(SQL.dueSchedules, nowMs, limit))).map(
      dueScheduleOf,
    );
  }

  async idleQueues(): Promise<ReadonlyArray<string>> {
    return (await this.read(() => this.rows<{ chat_id: string }>(SQL.idleQueues))).map((r) => r.chat_id);
  }

  async projection<S>(name: string, key: string): Promise<S | null> {
    const row = await this.read(() => this.row<ProjectionRowSql>(SQL.projection, name, key));
    return row ? (JSON.parse(openStoredProjection(this.keyring, name, { key, ...row })) as S) : null;
  }

  async searchRuns(query: RunSearch): Promise<RunSearchResult> {
    return this.read(() =>
      this.readTransaction(() => this.runProgram(searchRunsProgram(query, this.keyring))),
    );
  }

  async countRuns(queries: ReadonlyArray<RunSearch>): Promise<ReadonlyArray<number>> {
    return this.read(() => this.runProgram(countRunsProgram(queries)));
  }

  async projectionRows<S>(name: string): Promise<ReadonlyArray<S>> {
    const rows = await this.read(() =>
      this.rows<ProjectionRowSql & { key: string }>(SQL.projectionRows, name),
    );
    return rows.map((r) => JSON.parse(openStoredProjection(this.keyring, name, r)) as S);
  }

  // ---------------------------------------------------------------- ownership

  async claim(
    runId: string,
    workerId: string,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<ClaimResult> {
    return this.writeTransaction(() =>
      this.runProgram(claimProgram(SQL, runId, workerId, leaseMs, takeOverOf(options), options.trustExpiry)),
    );
  }

  async claimMany(
    runIds: ReadonlyArray<string>,
    workerId: string,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<ReadonlyMap<string, NonNullable<ClaimResult>>> {
    if (runIds.length === 0) return new Map();
    return this.writeTransaction(() =>
      this.runProgram(
        claimManyProgram(SQL, runIds, workerId, leaseMs, takeOverOf(options), options.trustExpiry),
      ),
    );
  }

  async renewClaims(workerId: string, leaseMs: number): Promise<ReadonlyArray<string>> {
    if (this.closed) return [];
    return this.writeTransaction(() => this.runProgram(renewProgram(SQL, workerId, leaseMs)));
  }

  async releaseClaims(workerId: string, runIds?: ReadonlyArray<string>): Promise<void> {
    if (this.closed) return;
    await this.writeTransaction(() => this.runProgram(releaseProgram(SQL, workerId, runIds)));
  }

  async currentClaim(runId: string): Promise<Claim | null> {
    const row = await this.read(() => this.row<ClaimRow>(SQL.claim, runId));
    return row ? toClaim(row) : null;
  }

  /** One read transaction: the claims and the presence rows as of one moment. */
  async liveness(): Promise<LivenessSnapshot> {
    return this.read(() => {
      this.db.exec("BEGIN");
      try {
        return this.runProgram(livenessProgram());
      } finally {
        this.db.exec("COMMIT");
      }
    });
  }

  async announceRuntime(runtime: RuntimeAnnouncement, ttlMs: number): Promise<void> {
    if (this.closed) return;
    await this.writeTransaction(() => this.runProgram(announceProgram(runtime, ttlMs)));
  }

  async withdrawRuntime(workerId: string): Promise<void> {
    if (this.closed) return;
    await this.writeTransaction(() => this.runProgram(withdrawProgram(workerId)));
  }

  async alerts(
    options: { readonly undelivered?: boolean; readonly limit?: number } = {},
  ): Promise<ReadonlyArray<AlertRecord>> {
    return this.read(() =>
      this.runProgram(alertsProgram(options.undelivered ?? false, options.limit ?? 100)),
    );
  }

  async alertCounts(): Promise<AlertCounts> {
    return this.read(() => this.runProgram(alertCountsProgram()));
  }

  async recordAlerts(alerts: ReadonlyArray<NewAlert>): Promise<void> {
    if (this.closed || alerts.length === 0) return;
    await this.writeTransaction(() => this.runProgram(recordAlertsProgram(alerts)));
  }

  async claimAlerts(workerId: string, leaseMs: number, limit: number): Promise<ReadonlyArray<AlertRecord>> {
    if (this.closed) return [];
    return this.writeTransaction(() => this.runProgram(claimAlertsProgram(workerId, leaseMs, limit)));
  }

  async alertAttempted(
    key: string,
    workerId: string,
    attempt: {
      readonly ok: boolean;
      readonly status?: number;
      readonly error?: string;
      readonly retryInMs: number | null;
    },
  ): Promise<boolean> {
    if (this.closed) return false;
    return this.writeTransaction(() => this.runProgram(alertAttemptedProgram(key, workerId, attempt)));
  }

  /** The head anchor next to the file, as it reads now. */
  async headAnchor(): Promise<AnchorReading> {
    return readAnchor(this.location);
  }

  private row<R>(sql: string, ...params: unknown[]): R | undefined {
    try {
      return this.statement(sql).get(...params) as R | undefined;
    } catch (error) {
      throw this.damaged(error);
    }
  }

  private rows<R>(sql: string, ...params: unknown[]): R[] {
    try {
      return this.statement(sql).all(...params) as R[];
    } catch (error) {
      throw this.damaged(error);
    }
  }

  /** A read that met a damaged file fails as the journal being unavailable, with what to do. */
  private damaged(error: unknown): unknown {
    const reason = damageOf(error);
    if (!reason) return this.storageFailed(error);
    return new JournalUnavailable({
      location: this.location,
      reason,
      hint: "Keep the file as evidence; restore the journal with its -wal file from a copy or the latest backup (holdfast backup).",
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let queued appends and writes waiting for the lock finish before closing: nothing accepted
    // is lost (each gives up after lockWaitMs at most).
    while (this.queue.length > 0 || this.scheduled || this.lockWaiters > 0) {
      await sleep(5);
      if (!this.scheduled && this.queue.length > 0) this.flush(performance.now());
    }
    this.closed = true;
    if (this.checkpointDue) clearTimeout(this.checkpointDue);
    if (!this.readOnly) this.checkpointOnClose();
    this.anchor?.close();
    this.db.close();
  }

  /**
   * Copy the WAL into the file and empty it, so a closed journal is whole in its file alone. Waits
   * for nobody: with another connection reading or writing it stays a partial checkpoint.
   */
  private checkpointOnClose(): void {
    try {
      this.db.pragma("busy_timeout = 0");
      this.db.pragma("wal_checkpoint(TRUNCATE)");
    } catch {
      // Busy, or the file is gone: what is committed stays in the WAL, where SQLite finds it.
    }
  }

  /** Run raw SQL (tests and maintenance commands only). */
  unsafeDatabase(): Db {
    return this.db;
  }

  /**
   * `fn` inside a write transaction. `BEGIN IMMEDIATE` is retried on timers while another process
   * holds the write lock (SQLite itself never waits: busy_timeout is 0 after open), so the event
   * loop runs meanwhile; `fn` then runs synchronously to COMMIT, so nothing else on this
   * connection interleaves with it.
   */
  private async writeTransaction<T>(fn: () => T): Promise<T> {
    this.assertOpen();
    // Durations on the monotonic clock: a wall clock stepped meanwhile neither ends the wait at once nor stretches it.
    const started = performance.now();
    this.lockWaiters += 1;
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          this.db.exec("BEGIN IMMEDIATE");
          break;
        } catch (error) {
          if (!isBusy(error)) throw this.storageFailed(error);
          if (performance.now() - started >= this.lockWaitMs) throw this.lockNotTaken(error);
        }
        await sleep(lockBackoff(attempt));
      }
    } finally {
      this.lockWaiters -= 1;
    }
    try {
      const result = fn();
      this.db.exec("COMMIT");
      return result;
    } catch (error) {
      this.rollbackQuietly();
      throw this.storageFailed(error);
    }
  }

  /**
   * A read, retried on timers on SQLITE_BUSY. In WAL mode readers do not wait for writers, and
   * while this connection is open nobody can take the whole file for themselves; what remains is
   * brief: another connection rebuilding the WAL index after a crash.
   */
  private async read<T>(fn: () => T): Promise<T> {
    const started = performance.now();
    for (let attempt = 0; ; attempt++) {
      this.assertOpen();
      try {
        return fn();
      } catch (error) {
        if (!isBusy(error)) throw error;
        if (performance.now() - started >= this.lockWaitMs) throw this.lockNotTaken(error, "read");
      }
      await sleep(lockBackoff(attempt));
    }
  }

  /**
   * Roll back what is left of a failed transaction. After a full disk or an I/O error SQLite may
   * have rolled it back itself, and a ROLLBACK can fail in turn: the first error is the one to tell.
   */
  private rollbackQuietly(): void {
    try {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
    } catch {
      // Nothing more to undo, or the storage refuses even that: SQLite undoes it on the next open.
    }
  }

  /** A full disk or an I/O error as `JournalUnavailable`, naming the cause; any other error as it is. */
  private storageFailed(error: unknown): unknown {
    const reason = storageFailureOf(error);
    if (!reason) return error;
    // An I/O error may have come during the commit, which may be durable: nothing may assume either
    // way (decision 0068), so the effect of an intent it carried is not started. A full disk is definite.
    return new JournalUnavailable({
      location: this.location,
      reason,
      hint: STORAGE_HINT,
      ...(sqliteCode(error).startsWith("SQLITE_IOERR") ? { written: "unknown" as const } : {}),
    });
  }

  private lockNotTaken(error: unknown, what: "write" | "read" = "write"): JournalUnavailable {
    const code = sqliteCode(error) || String(error);
    return new JournalUnavailable({
      location: this.location,
      reason:
        what === "write"
          ? `the write lock could not be taken within ${this.lockWaitMs} ms (${code}); nothing was written`
          : `the journal could not be read within ${this.lockWaitMs} ms (${code})`,
      hint: "Another process holds the journal for too long; check for stuck holdfast processes (a long prune, rebuild or backup), then retry.",
    });
  }

  private readTransaction<T>(fn: () => T): T {
    this.db.exec("BEGIN");
    try {
      return fn();
    } finally {
      this.db.exec("ROLLBACK");
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new JournalClosed({ location: this.location });
  }
}

const SQL = statements(libsqlDialect);

/** SQLite names the columns of the unique key that refused a write; map them to the shared keys. */
const uniqueKeyOf = (error: unknown): UniqueKey | null => {
  if (!sqliteCode(error).startsWith("SQLITE_CONSTRAINT")) return null;
  const message = String((error as Error).message);
  if (!/UNIQUE|PRIMARY KEY/.test(message)) return null;
  if (message.includes("events.stream_id, events.version")) return "event-version";
  if (message.includes("admissions.chat_id, admissions.input_id")) return "admission";
  if (message.includes("run_guard.chat_id")) return "active-run";
  return "other";
};
