import { randomBytes, randomUUID } from "node:crypto";
import { accessSync, closeSync, constants, existsSync, mkdirSync, openSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "libsql";
import {
  type AnyEvent,
  canonicalJson,
  chainHash,
  decodeRow,
  EVENT_SCHEMA_VERSION,
  encodePayload,
  GENESIS_HASH,
  type RecordedEvent,
  type StoredRow,
} from "../../events/index.js";
import { type AnyProjection, handles, inlineProjections } from "../../projections/index.js";
import {
  ActiveRunExists,
  DuplicateAdmission,
  FencedOut,
  JournalClosed,
  JournalTooNew,
  JournalUnavailable,
  WrongExpectedVersion,
} from "../../runtime/errors.js";
import type {
  Admission,
  AppendRequest,
  AppendResult,
  Claim,
  Journal,
  StreamHead,
} from "../../runtime/Journal.js";
import { describeExpected, expectedVersionMatches, guardWritesFor } from "../sql/guard.js";
import { APPLICATION_ID, LATEST_SCHEMA_VERSION, MIGRATIONS } from "./migrations.js";

type Db = InstanceType<typeof Database>;

export interface LibsqlJournalOptions {
  /** Create the parent folder when missing (used for the default `.holdfast/` location). */
  readonly createFolder?: boolean;
  /** Milliseconds to wait for another process's write lock before retrying. Default 5000. */
  readonly busyTimeoutMs?: number;
  /** Called inside the group commit, between the batch's writes and COMMIT (crash tests). */
  readonly onBeforeCommit?: () => void;
}

interface Pending {
  readonly request: AppendRequest;
  readonly resolve: (result: AppendResult) => void;
  readonly reject: (error: unknown) => void;
}

/** One PRAGMA's value. (The driver's `simple` option returns the row, not the value.) */
const pragmaValue = (db: Db, pragma: string): unknown => {
  const row = (db.prepare(`PRAGMA ${pragma}`).all() as Array<Record<string, unknown>>)[0];
  return row ? Object.values(row)[0] : undefined;
};

const sqliteCode = (error: unknown): string =>
  typeof error === "object" && error !== null && "code" in error
    ? String((error as { code: unknown }).code)
    : "";

/** Giving up on a lock after this long surfaces a clear error instead of SQLITE_BUSY. */
const LOCK_GIVE_UP_MS = 60_000;

/**
 * The embedded journal on one libSQL file: WAL, `synchronous=FULL`, appends group-committed.
 * Safe for several processes on the same file (SQLite's locks, `BEGIN IMMEDIATE`, busy timeout).
 */
export class LibsqlJournal implements Journal {
  readonly engine = "libsql";
  readonly location: string;
  readonly fingerprintKey: Uint8Array;
  private readonly db: Db;
  private queue: Pending[] = [];
  private scheduled = false;
  private closed = false;
  private readonly onBeforeCommit: (() => void) | undefined;
  private readonly stmts;

  private constructor(db: Db, location: string, key: Uint8Array, options: LibsqlJournalOptions) {
    this.db = db;
    this.location = location;
    this.fingerprintKey = key;
    this.onBeforeCommit = options.onBeforeCommit;
    this.stmts = {
      head: db.prepare("SELECT version, hash FROM events WHERE stream_id = ? ORDER BY version DESC LIMIT 1"),
      insert: db.prepare(
        "INSERT INTO events (stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      ),
      stream: db.prepare(
        "SELECT position, stream_id, version, event_id, recorded_at, prev_hash, hash, schema_version, data FROM events WHERE stream_id = ? ORDER BY version",
      ),
      all: db.prepare(
        "SELECT position, stream_id, version, event_id, recorded_at, prev_hash, hash, schema_version, data FROM events WHERE position > ? ORDER BY position LIMIT ?",
      ),
      admission: db.prepare(
        "SELECT chat_id, input_id, digest, run_id FROM admissions WHERE chat_id = ? AND input_id = ?",
      ),
      insertAdmission: db.prepare(
        "INSERT INTO admissions (chat_id, input_id, digest, run_id) VALUES (?, ?, ?, ?)",
      ),
      activeRun: db.prepare("SELECT run_id FROM run_guard WHERE chat_id = ? AND active = 1"),
      activeRuns: db.prepare("SELECT run_id FROM run_guard WHERE active = 1 ORDER BY rowid"),
      activate: db.prepare("INSERT INTO run_guard (run_id, chat_id, active) VALUES (?, ?, 1)"),
      finish: db.prepare("UPDATE run_guard SET active = 0 WHERE run_id = ?"),
      projection: db.prepare("SELECT value FROM projections WHERE name = ? AND key = ?"),
      projectionRows: db.prepare("SELECT value FROM projections WHERE name = ? ORDER BY position"),
      upsertProjection: db.prepare(
        "INSERT INTO projections (name, key, value, position) VALUES (?, ?, ?, ?) ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, position = excluded.position",
      ),
      claim: db.prepare("SELECT run_id, worker_id, epoch, lease_until FROM claims WHERE run_id = ?"),
      insertClaim: db.prepare(
        "INSERT INTO claims (run_id, worker_id, epoch, lease_until) VALUES (?, ?, ?, ?)",
      ),
      updateClaim: db.prepare("UPDATE claims SET worker_id = ?, epoch = ?, lease_until = ? WHERE run_id = ?"),
      renew: db.prepare("UPDATE claims SET lease_until = ? WHERE worker_id = ?"),
      release: db.prepare("DELETE FROM claims WHERE worker_id = ?"),
      releaseRun: db.prepare("DELETE FROM claims WHERE worker_id = ? AND run_id = ?"),
    };
  }

  /** Open (creating when absent) a journal file; checks the file, applies migrations. */
  static open(path: string, options: LibsqlJournalOptions = {}): LibsqlJournal {
    const location = resolve(path);
    const folder = dirname(location);
    const unavailable = (reason: string, hint: string) => new JournalUnavailable({ location, reason, hint });

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

    let db: Db;
    try {
      db = new Database(location, { timeout: options.busyTimeoutMs ?? 5000 });
    } catch (cause) {
      throw unavailable(`cannot be opened (${String(cause)})`, "Check the path and permissions.");
    }
    try {
      const key = LibsqlJournal.prepareFile(db, location, options);
      return new LibsqlJournal(db, location, key, options);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  private static prepareFile(db: Db, location: string, options: LibsqlJournalOptions): Uint8Array {
    const unavailable = (reason: string, hint: string) => new JournalUnavailable({ location, reason, hint });
    let userVersion: number;
    let applicationId: number;
    let tables: number;
    try {
      // Read-only look first: a newer or foreign file must not be changed at all.
      userVersion = Number(pragmaValue(db, "user_version") ?? 0);
      applicationId = Number(pragmaValue(db, "application_id") ?? 0);
      tables = Number(
        (db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table'").get() as { n: number }).n,
      );
    } catch (cause) {
      if (sqliteCode(cause) === "SQLITE_NOTADB") {
        throw unavailable(
          "the file is not a database",
          "Point --db at a holdfast journal, or at a path that does not exist yet.",
        );
      }
      throw unavailable(
        `cannot be read (${sqliteCode(cause) || String(cause)})`,
        "Check the file and its permissions.",
      );
    }
    if (tables > 0 && applicationId !== APPLICATION_ID) {
      throw unavailable(
        "the file is a database but not a holdfast journal",
        "Point --db at a holdfast journal, or at a path that does not exist yet.",
      );
    }
    if (userVersion > LATEST_SCHEMA_VERSION) {
      throw new JournalTooNew({ location, found: userVersion, supported: LATEST_SCHEMA_VERSION });
    }

    const busy = options.busyTimeoutMs ?? 5000;
    db.pragma(`busy_timeout = ${Math.max(5000, busy)}`);
    const modeName = pragmaValue(db, "journal_mode = WAL");
    if (String(modeName).toLowerCase() !== "wal") {
      throw unavailable(
        `WAL mode could not be enabled (got ${String(modeName)})`,
        "Use a local file system.",
      );
    }
    db.pragma("synchronous = FULL");
    db.pragma("foreign_keys = ON");
    db.pragma("secure_delete = ON");

    const check = db.prepare("PRAGMA quick_check").all() as Array<Record<string, unknown>>;
    const problems = check.map((row) => String(Object.values(row)[0])).filter((v) => v !== "ok");
    if (problems.length > 0) {
      throw unavailable(
        `integrity check failed: ${problems.slice(0, 3).join("; ")}`,
        "Restore the latest backup (holdfast backup) and run holdfast audit; do not write to this file.",
      );
    }

    // Migrations, each in its own write transaction; a second process racing here waits on the lock.
    for (const migration of MIGRATIONS) {
      db.exec("BEGIN IMMEDIATE");
      try {
        const current = Number(pragmaValue(db, "user_version") ?? 0);
        if (current >= migration.id) {
          db.exec("ROLLBACK");
          continue;
        }
        db.exec(migration.sql);
        if (migration.id === 1) {
          db.pragma(`application_id = ${APPLICATION_ID}`);
          db.prepare("INSERT INTO meta (key, value) VALUES ('fingerprint_key', ?)").run(
            randomBytes(32).toString("hex"),
          );
          db.prepare("INSERT INTO meta (key, value) VALUES ('created_at', ?)").run(new Date().toISOString());
        }
        db.pragma(`user_version = ${migration.id}`);
        db.exec("COMMIT");
      } catch (error) {
        if (db.inTransaction) db.exec("ROLLBACK");
        throw error;
      }
    }
    const row = db.prepare("SELECT value FROM meta WHERE key = 'fingerprint_key'").get() as
      | { value: string }
      | undefined;
    if (!row)
      throw unavailable(
        "the fingerprint key is missing",
        "The journal was changed outside holdfast; restore a backup.",
      );
    return Uint8Array.from(Buffer.from(row.value, "hex"));
  }

  // ---------------------------------------------------------------- append (group commit)

  append(request: AppendRequest): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new JournalClosed({ location: this.location }));
    return new Promise((resolvePromise, reject) => {
      this.queue.push({ request, resolve: resolvePromise, reject });
      this.schedule(0);
    });
  }

  private schedule(delayMs: number, startedAt = Date.now()): void {
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => {
      this.scheduled = false;
      this.flush(startedAt);
    };
    if (delayMs === 0) setImmediate(run);
    else setTimeout(run, delayMs);
  }

  /**
   * Commit everything queued so far in one transaction. Each request runs in a savepoint, so one
   * refused request (wrong version, active run) does not sink the others. Callers resolve only
   * after the COMMIT that holds their events.
   */
  private flush(startedAt: number): void {
    if (this.queue.length === 0) return;
    try {
      this.db.exec("BEGIN IMMEDIATE");
    } catch (error) {
      if (sqliteCode(error).startsWith("SQLITE_BUSY") && Date.now() - startedAt < LOCK_GIVE_UP_MS) {
        this.schedule(25 + Math.floor(Math.random() * 50), startedAt);
        return;
      }
      const failure = new JournalUnavailable({
        location: this.location,
        reason: `the write lock could not be taken (${sqliteCode(error) || String(error)})`,
        hint: "Another process holds the journal for too long; check for stuck holdfast processes.",
      });
      for (const p of this.queue.splice(0)) p.reject(failure);
      return;
    }
    const batch = this.queue.splice(0);
    const outcomes: Array<{ ok: AppendResult } | { error: unknown }> = [];
    try {
      for (const pending of batch) {
        this.db.exec("SAVEPOINT append_one");
        try {
          outcomes.push({ ok: this.applyOne(pending.request) });
          this.db.exec("RELEASE append_one");
        } catch (error) {
          this.db.exec("ROLLBACK TO append_one");
          this.db.exec("RELEASE append_one");
          outcomes.push({ error });
        }
      }
      this.onBeforeCommit?.();
      this.db.exec("COMMIT");
    } catch (error) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      for (const p of batch) p.reject(error);
      return;
    }
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      if ("ok" in outcome) pending.resolve(outcome.ok);
      else pending.reject(outcome.error);
    });
  }

  private applyOne(request: AppendRequest): AppendResult {
    const { streamId, expectedVersion, events, fence } = request;
    const head = this.stmts.head.get(streamId) as { version: number; hash: string } | undefined;
    const current = head?.version ?? 0;
    if (!expectedVersionMatches(expectedVersion, current)) {
      throw new WrongExpectedVersion({
        streamId,
        expected: describeExpected(expectedVersion),
        actual: current,
      });
    }
    if (fence) {
      const claim = this.stmts.claim.get(fence.runId) as ClaimRow | undefined;
      if (!claim || claim.worker_id !== fence.workerId || claim.epoch !== fence.epoch) {
        throw new FencedOut({
          runId: fence.runId,
          workerId: fence.workerId,
          epoch: fence.epoch,
          currentWorkerId: claim?.worker_id ?? null,
          currentEpoch: claim?.epoch ?? null,
        });
      }
    }
    let prevHash = head?.hash ?? GENESIS_HASH;
    let version = current;
    const recorded: RecordedEvent[] = [];
    for (const event of events) {
      version += 1;
      const data = encodePayload(event);
      const eventId = randomUUID();
      const recordedAt = new Date().toISOString();
      const hash = chainHash({
        streamId,
        version,
        eventId,
        recordedAt,
        prevHash,
        schemaVersion: EVENT_SCHEMA_VERSION,
        data,
      });
      const result = this.stmts.insert.run(
        streamId,
        version,
        eventId,
        event.type,
        EVENT_SCHEMA_VERSION,
        recordedAt,
        canonicalJson(data),
        prevHash,
        hash,
      );
      const entry: RecordedEvent = {
        streamId,
        version,
        position: Number(result.lastInsertRowid),
        eventId,
        recordedAt,
        prevHash,
        hash,
        schemaVersion: EVENT_SCHEMA_VERSION,
        event,
      };
      this.applyGuards(event);
      this.applyProjections(entry, inlineProjections);
      recorded.push(entry);
      prevHash = hash;
    }
    return { streamId, nextVersion: version, recorded };
  }

  private applyGuards(event: AnyEvent): void {
    for (const write of guardWritesFor(event)) {
      if (write.kind === "admit") {
        // Pre-reads only give the nicer error; the unique keys are what enforce (law 6).
        if (this.stmts.admission.get(write.chatId, write.inputId)) {
          throw new DuplicateAdmission({ chatId: write.chatId, inputId: write.inputId });
        }
        const active = this.stmts.activeRun.get(write.chatId) as { run_id: string } | undefined;
        if (active) throw new ActiveRunExists({ chatId: write.chatId, runId: active.run_id });
        this.stmts.insertAdmission.run(write.chatId, write.inputId, write.digest, write.runId);
        this.stmts.activate.run(write.runId, write.chatId);
      } else {
        this.stmts.finish.run(write.runId);
      }
    }
  }

  private applyProjections(entry: RecordedEvent, projections: ReadonlyArray<AnyProjection>): void {
    for (const projection of projections) {
      if (!handles(projection, entry)) continue;
      for (const key of projection.keysOf(entry)) {
        const row = this.stmts.projection.get(projection.name, key) as { value: string } | undefined;
        const state = row ? JSON.parse(row.value) : undefined;
        const next = projection.evolve(state, entry, key);
        this.stmts.upsertProjection.run(projection.name, key, JSON.stringify(next), entry.position);
      }
    }
  }

  // ---------------------------------------------------------------- reads

  async readStream(streamId: string): Promise<ReadonlyArray<RecordedEvent>> {
    this.assertOpen();
    return (this.stmts.stream.all(streamId) as EventRow[]).map((row) => decodeRow(toStored(row)));
  }

  async readAll(options: {
    readonly after: number;
    readonly limit: number;
  }): Promise<ReadonlyArray<RecordedEvent>> {
    this.assertOpen();
    return (this.stmts.all.all(options.after, options.limit) as EventRow[]).map((row) =>
      decodeRow(toStored(row)),
    );
  }

  /** Raw rows, undecoded: for the audit, which must see what is stored even when it does not decode. */
  readAllRows(options: { readonly after: number; readonly limit: number }): StoredRow[] {
    this.assertOpen();
    return (this.stmts.all.all(options.after, options.limit) as EventRow[]).map(toStored);
  }

  async streamHead(streamId: string): Promise<StreamHead | null> {
    this.assertOpen();
    const head = this.stmts.head.get(streamId) as { version: number; hash: string } | undefined;
    return head ? { streamId, version: head.version, hash: head.hash } : null;
  }

  async admission(chatId: string, inputId: string): Promise<Admission | null> {
    this.assertOpen();
    const row = this.stmts.admission.get(chatId, inputId) as
      | { chat_id: string; input_id: string; digest: string; run_id: string }
      | undefined;
    return row ? { chatId: row.chat_id, inputId: row.input_id, digest: row.digest, runId: row.run_id } : null;
  }

  async activeRun(chatId: string): Promise<string | null> {
    this.assertOpen();
    const row = this.stmts.activeRun.get(chatId) as { run_id: string } | undefined;
    return row?.run_id ?? null;
  }

  async activeRuns(): Promise<ReadonlyArray<string>> {
    this.assertOpen();
    return (this.stmts.activeRuns.all() as Array<{ run_id: string }>).map((r) => r.run_id);
  }

  async projection<S>(name: string, key: string): Promise<S | null> {
    this.assertOpen();
    const row = this.stmts.projection.get(name, key) as { value: string } | undefined;
    return row ? (JSON.parse(row.value) as S) : null;
  }

  async projectionRows<S>(name: string): Promise<ReadonlyArray<S>> {
    this.assertOpen();
    return (this.stmts.projectionRows.all(name) as Array<{ value: string }>).map(
      (r) => JSON.parse(r.value) as S,
    );
  }

  // ---------------------------------------------------------------- ownership

  async claim(
    runId: string,
    workerId: string,
    leaseMs: number,
    options: { readonly takeOverFrom?: string } = {},
  ): Promise<(Claim & { readonly previous: Claim | null }) | null> {
    this.assertOpen();
    return this.writeTransaction(() => {
      const now = Date.now();
      const row = this.stmts.claim.get(runId) as ClaimRow | undefined;
      const previous = row ? toClaim(row) : null;
      if (!row) {
        this.stmts.insertClaim.run(runId, workerId, 1, now + leaseMs);
        return { runId, workerId, epoch: 1, leaseUntil: now + leaseMs, previous };
      }
      if (row.worker_id === workerId) {
        this.stmts.updateClaim.run(workerId, row.epoch, now + leaseMs, runId);
        return { runId, workerId, epoch: row.epoch, leaseUntil: now + leaseMs, previous };
      }
      if (row.lease_until > now && row.worker_id !== options.takeOverFrom) return null;
      this.stmts.updateClaim.run(workerId, row.epoch + 1, now + leaseMs, runId);
      return { runId, workerId, epoch: row.epoch + 1, leaseUntil: now + leaseMs, previous };
    });
  }

  async renewClaims(workerId: string, leaseMs: number): Promise<void> {
    if (this.closed) return;
    this.writeTransaction(() => this.stmts.renew.run(Date.now() + leaseMs, workerId));
  }

  async releaseClaims(workerId: string, runIds?: ReadonlyArray<string>): Promise<void> {
    if (this.closed) return;
    this.writeTransaction(() => {
      if (runIds) for (const runId of runIds) this.stmts.releaseRun.run(workerId, runId);
      else this.stmts.release.run(workerId);
    });
  }

  async currentClaim(runId: string): Promise<Claim | null> {
    this.assertOpen();
    const row = this.stmts.claim.get(runId) as ClaimRow | undefined;
    return row ? toClaim(row) : null;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let queued appends commit before closing: nothing accepted is lost.
    while (this.queue.length > 0 || this.scheduled) {
      await new Promise((r) => setTimeout(r, 5));
      if (!this.scheduled && this.queue.length > 0) this.flush(Date.now());
    }
    this.closed = true;
    this.db.close();
  }

  /** Run raw SQL (tests and maintenance commands only). */
  unsafeDatabase(): Db {
    return this.db;
  }

  private writeTransaction<T>(fn: () => T): T {
    const started = Date.now();
    for (;;) {
      try {
        this.db.exec("BEGIN IMMEDIATE");
        break;
      } catch (error) {
        if (!sqliteCode(error).startsWith("SQLITE_BUSY") || Date.now() - started > LOCK_GIVE_UP_MS)
          throw error;
      }
    }
    try {
      const result = fn();
      this.db.exec("COMMIT");
      return result;
    } catch (error) {
      if (this.db.inTransaction) this.db.exec("ROLLBACK");
      throw error;
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new JournalClosed({ location: this.location });
  }
}

interface EventRow {
  position: number;
  stream_id: string;
  version: number;
  event_id: string;
  recorded_at: string;
  prev_hash: string;
  hash: string;
  schema_version: number;
  data: string;
}

interface ClaimRow {
  run_id: string;
  worker_id: string;
  epoch: number;
  lease_until: number;
}

const toStored = (row: EventRow): StoredRow => ({
  streamId: row.stream_id,
  version: row.version,
  position: row.position,
  eventId: row.event_id,
  recordedAt: row.recorded_at,
  prevHash: row.prev_hash,
  hash: row.hash,
  schemaVersion: row.schema_version,
  data: row.data,
});

const toClaim = (row: ClaimRow): Claim => ({
  runId: row.run_id,
  workerId: row.worker_id,
  epoch: row.epoch,
  leaseUntil: row.lease_until,
});
