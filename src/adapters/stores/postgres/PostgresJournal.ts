import { randomBytes } from "node:crypto";
import pg from "pg";
import { decodeRow, type Keyring, type RecordedEvent, type StoredRow } from "../../../events/index.js";
import { inlineProjections } from "../../../projections/index.js";
import { JournalClosed, JournalTooNew, JournalUnavailable } from "../../../runtime/errors.js";
import type {
  Admission,
  AlertCounts,
  AlertRecord,
  AppendRequest,
  AppendResult,
  Claim,
  ClaimOptions,
  CommitOrigin,
  DroppedStream,
  DueSchedule,
  DueWait,
  Journal,
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
import { appendAllProgram, type ProjectionRowWrite } from "../sql/append.js";
import { batchProgram, type GroupOutcome, splitBatch } from "../sql/batch.js";
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
import { type Program, runAsync, type SqlStep, type UniqueKey, UniqueViolation } from "../sql/program.js";
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
import { postgresDialect, statements } from "../sql/statements.js";
import { connectWithRetry } from "./connect.js";
import { readBackLostCommit } from "./lostCommit.js";
import { LATEST_SCHEMA_VERSION, MIGRATIONS } from "./migrations.js";
import { CommitListener, commitChannel } from "./notify.js";
import type { PostgresJournalOptions } from "./options.js";
import { answerOwned, appendOwned, OwnedAppends, type OwnedPlan } from "./ownedAppend.js";
import {
  checkout,
  describe,
  ended,
  giveBack,
  outOfResources,
  prepared,
  refusedBeforeCommit,
} from "./pooled.js";
import { readableSchemaKey } from "./readOnly.js";
import { maskUrl } from "./url.js";

export type { PostgresJournalOptions } from "./options.js";

interface Pending {
  readonly requests: ReadonlyArray<AppendRequest>;
  readonly resolve: (results: AppendResult[]) => void;
  readonly reject: (error: unknown) => void;
  /** How many of its commits were lost and read back as not written (each then sent again). */
  resent?: number;
}

/** How often a batch whose commit was read back as not written is sent again before its callers hear so. */
const RESENDS = 3;
/** How long a lost commit is read back for, by default (decision 0068). */
const READ_BACK_MS = 30_000;

const SQL = statements(postgresDialect);
const NOW_MS = "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now";
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The shared journal on PostgreSQL, for several workers on several hosts. Same tables, events,
 * chain and projections as libSQL, written by the same program (src/adapters/stores/sql). Appends are
 * group-committed; every transaction that inserts events (append batches, retention) takes one
 * advisory lock per journal before its first insert, so positions are handed out in commit order
 * and a reader paging by position never skips a late commit.
 */
/** The heads of a list of streams (bound as one array), in one round trip. */
const STREAM_HEADS =
  "SELECT e.stream_id, e.version, e.hash FROM events e JOIN (SELECT stream_id, MAX(version) AS version FROM events WHERE stream_id = ANY(?::text[]) GROUP BY stream_id) h ON e.stream_id = h.stream_id AND e.version = h.version";

export class PostgresJournal implements Journal {
  readonly engine = "postgres";
  readonly location: string;
  readonly fingerprintKey: Uint8Array;
  readonly keyring: Keyring | null;
  readonly schema: string;
  private readonly pool: pg.Pool;
  private readonly options: PostgresJournalOptions;
  private queue: Pending[] = [];
  private draining = false;
  private closed = false;
  private readonly committedListeners = new Set<(origin: CommitOrigin) => void>();
  /** Other processes' commits, heard on a LISTEN connection opened for the first listener. */
  private commitListener: CommitListener | null = null;
  /**
   * What this journal's own fenced appends committed, for a run owner's next append in one
   * statement (decision 0034). None with payload keys (a sealed row's value depends on its
   * position) or a commit hook (a test holding a transaction open needs one to hold).
   */
  private readonly owned: OwnedAppends | null;

  private constructor(
    pool: pg.Pool,
    location: string,
    schema: string,
    key: Uint8Array,
    keyring: Keyring | null,
    options: PostgresJournalOptions,
  ) {
    this.pool = pool;
    this.location = location;
    this.schema = schema;
    this.fingerprintKey = key;
    this.keyring = keyring;
    this.options = options;
    this.owned =
      keyring || options.onBeforeCommit || options.readOnly ? null : new OwnedAppends(SQL, inlineProjections);
  }

  /** Connect (retrying with back-off), apply migrations, read the fingerprint key. */
  static async open(url: string, options: PostgresJournalOptions = {}): Promise<PostgresJournal> {
    const location = maskUrl(url);
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new JournalUnavailable({
        location,
        reason: "the URL cannot be parsed",
        hint: "Use postgres://user:password@host:5432/database[?schema=name].",
      });
    }
    const schema = options.schema ?? parsed.searchParams.get("schema") ?? "holdfast";
    if (!SCHEMA_NAME.test(schema)) {
      throw new JournalUnavailable({
        location,
        reason: `the schema name "${schema}" is not a plain lower-case identifier`,
        hint: "Use letters a-z, digits and underscores, starting with a letter or underscore.",
      });
    }
    parsed.searchParams.delete("schema");
    const keyring = keyringFromEnv(options.env ?? process.env, location);
    const pool = new pg.Pool({
      connectionString: parsed.toString(),
      max: options.poolSize ?? 4,
      connectionTimeoutMillis: 5000,
      // Every connection resolves the shared, unqualified statements in the journal's schema.
      // Law 1 needs durable commits whatever the server's default.
      options: `-c search_path=${schema} -c synchronous_commit=on -c idle_in_transaction_session_timeout=${Math.max(1, Math.round(options.idleInTransactionMs ?? 10_000))}${options.readOnly ? " -c default_transaction_read_only=on" : ""}`,
      application_name: "holdfast",
    });
    // An idle connection dropped by the server surfaces on the next query; it must not crash the process.
    pool.on("error", () => {});
    try {
      await connectWithRetry(pool, location, options.retry);
      const key = options.readOnly
        ? await readableSchemaKey(pool, location, schema)
        : await migrate(pool, location, schema);
      const journal = new PostgresJournal(pool, location, schema, key, keyring, options);
      if (options.keyCheck !== false) await journal.read(keyCheckProgram(SQL, keyring));
      if (keyring && !options.readOnly) await journal.fillSearch(keyring);
      return journal;
    } catch (error) {
      await pool.end().catch(() => {});
      throw error;
    }
  }

  // ---------------------------------------------------------------- append (group commit)

  append(request: AppendRequest): Promise<AppendResult> {
    return this.appendAll([request]).then((results) => results[0]!);
  }

  appendAll(requests: ReadonlyArray<AppendRequest>): Promise<AppendResult[]> {
    if (this.closed) return Promise.reject(new JournalClosed({ location: this.location }));
    return new Promise((resolve, reject) => {
      this.queue.push({ requests, resolve, reject });
      if (!this.draining) {
        this.draining = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  /** While a batch commits, new appends queue; they go together into the next transaction. */
  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0);
        try {
          await this.commitBatch(batch);
        } catch (error) {
          // Nothing may escape a drain nobody awaits: its callers hear of the failure (a caller
          // already answered keeps its answer), and the next batch still runs.
          for (const p of batch) p.reject(error);
        }
      }
    } finally {
      this.draining = false;
    }
  }

  /**
   * One transaction for the batch; each caller resolves only after the COMMIT that holds its events.
   * One refused request must not sink the others. Most requests are refused, if at all, by their
   * first statement (the read of the claim and head: a wrong version, a lost claim), before they
   * wrote anything, so a batch first runs without savepoints (each one a round trip). If a request
   * fails after it may have written, or a statement fails (which aborts the transaction), the
   * transaction is rolled back and the batch runs again with a savepoint per request.
   */
  private async commitBatch(batch: Pending[]): Promise<void> {
    let plan: OwnedPlan | null = null;
    try {
      if (this.owned && batch.every((p) => p.requests.length === 1))
        plan = this.owned.plan(batch.map((p) => p.requests[0]!));
    } catch {
      // A request that cannot be prepared (an event its schema refuses) is refused by the
      // transaction path, for its caller alone.
      plan = null;
    }
    if (plan) {
      const onCommitted = () => {
        for (const listener of this.committedListeners) listener("here");
      };
      const owned = await appendOwned(
        this.pool,
        this.schema,
        this.location,
        this.owned!,
        plan,
        batch,
        onCommitted,
      );
      if (owned === "answered") return;
      if (owned !== "refused") {
        await this.settleLost(batch, owned.eventIds, owned.lost, (positions) => {
          answerOwned(
            this.location,
            this.owned!,
            plan,
            batch,
            owned.eventIds.map((id) => positions.get(id)!),
            onCommitted,
          );
        });
        return;
      }
    }
    let client: pg.PoolClient;
    try {
      client = await checkout(this.pool);
    } catch (error) {
      const failure = this.unavailable(error, "nothing of this batch was written");
      for (const p of batch) p.reject(failure);
      return;
    }
    let outcomes: Array<{ ok: AppendResult[] } | { error: unknown }> = [];
    let committing = false;
    // The projection rows written, per caller (by its first request) and for the batch program.
    const written = new Map<AppendRequest | "batch", ProjectionRowWrite[]>();
    try {
      let savepoints = false;
      for (;;) {
        written.clear();
        const attempt = await this.applyBatch(client, batch, savepoints, written);
        if (attempt !== "again") {
          outcomes = attempt;
          break;
        }
        await client.query("ROLLBACK");
        savepoints = true;
      }
      if (outcomes.some((o) => "ok" in o)) {
        await this.options.onBeforeCommit?.();
        if (ended.has(client)) throw new Error("the server ended the session before COMMIT");
        committing = true;
        await client.query("COMMIT");
      } else {
        await client.query("ROLLBACK");
      }
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      giveBack(client, true);
      // Only an ERROR refused a statement (or our own tagged refusal): anything else — a FATAL of a
      // terminated session or a shutdown (57P01), a dropped socket — lost the connection (0069).
      const lost = !refusedBeforeCommit(error) && !isTagged(error);
      // A FATAL (a terminated session, a shutdown) during COMMIT may come after the commit, too.
      if (committing && lost) {
        const eventIds = outcomes.flatMap((o) =>
          "ok" in o ? o.ok.flatMap((r) => r.recorded.map((e) => e.eventId)) : [],
        );
        await this.settleLost(batch, eventIds, describe(error), () =>
          this.answerCommitted(batch, outcomes, written),
        );
        return;
      }
      const failure = lost
        ? this.unavailable(error, "nothing of this batch was written")
        : (outOfResources(error, this.location) ?? error);
      for (const p of batch) p.reject(failure);
      return;
    }
    giveBack(client);
    this.answerCommitted(batch, outcomes, written);
  }

  /**
   * A batch whose commit got no answer (decision 0068): read its events back before anything else
   * happens. Committed: its callers are answered as if the reply had come. Not written: it is sent
   * again, first in the queue (the transaction path reads everything afresh and refuses what it
   * must: a claim or a version that moved meanwhile). Nobody can tell within the window: the callers
   * hear `JournalUnavailable { written: "unknown" }`.
   */
  private async settleLost(
    batch: Pending[],
    eventIds: ReadonlyArray<string>,
    cause: string,
    committed: (positions: ReadonlyMap<string, number>) => void,
  ): Promise<void> {
    const windowMs = this.options.commitReadBackMs ?? READ_BACK_MS;
    const found = await readBackLostCommit(this.pool, this.schema, eventIds, windowMs);
    this.options.onLostCommit?.(found.committed);
    if (found.committed === true) {
      committed(found.positions);
      return;
    }
    if (found.committed === false && batch.every((p) => (p.resent ?? 0) < RESENDS)) {
      for (const p of batch) p.resent = (p.resent ?? 0) + 1;
      this.queue.unshift(...batch);
      return;
    }
    const streams = [...new Set(batch.flatMap((p) => p.requests.map((r) => r.streamId)))].join(", ");
    const failure =
      found.committed === false
        ? this.unavailable(
            new Error(cause),
            `the append to ${streams} was lost ${RESENDS + 1} times and read back as not written each time; nothing of it was written`,
          )
        : found.committed === "partly"
          ? new JournalUnavailable({
              location: this.location,
              reason: `the connection failed during the COMMIT of an append to ${streams} (${cause}), and only ${found.found} of its ${eventIds.length} events were read back`,
              hint: "Run `holdfast audit` on this journal before going on.",
            })
          : new JournalUnavailable({
              location: this.location,
              reason: `the connection failed during the COMMIT of an append to ${streams} (${cause}), and its events could not be read back within ${Math.round(windowMs / 1000)} s (${found.lastError}); it may or may not have been written`,
              hint: "Check that PostgreSQL is running and reachable. Do not assume the events are absent: a worker starts no effect whose intent this was, and recovery reads the stream once PostgreSQL answers.",
              written: "unknown",
            });
    for (const p of batch) p.reject(failure);
  }

  /** Answer a batch's callers after the COMMIT that holds their events (or one read back). */
  private answerCommitted(
    batch: ReadonlyArray<Pending>,
    outcomes: ReadonlyArray<{ ok: AppendResult[] } | { error: unknown }>,
    written: Map<AppendRequest | "batch", ProjectionRowWrite[]>,
  ): void {
    if (outcomes.some((o) => "ok" in o)) for (const listener of this.committedListeners) listener("here");
    this.owned?.learnRows(written.get("batch") ?? []);
    batch.forEach((pending, i) => {
      const outcome = outcomes[i]!;
      pending.requests.forEach((request, j) => {
        const recorded = "ok" in outcome ? outcome.ok[j]?.recorded : undefined;
        if (recorded) {
          this.owned?.learnHead(request, recorded);
          this.owned?.learnRows(written.get(request) ?? []);
        } else this.owned?.forget(request.streamId);
      });
      if ("ok" in outcome) pending.resolve(outcome.ok);
      else pending.reject(outcome.error);
    });
  }

  /**
   * Open the batch's transaction and run its requests. First (without savepoints) every caller that
   * can be decided in memory goes through {@link batchProgram}: a few statements for all of them.
   * The rest (admissions, decided by unique keys) run one by one. Without savepoints, "again" when
   * the batch program's statements failed, or a request of a batch of several failed after its
   * first statement or a statement failed: what it left in the transaction cannot be taken back
   * alone. A batch of one needs no savepoint: if it fails, the whole transaction is rolled back.
   */
  private async applyBatch(
    client: pg.PoolClient,
    batch: ReadonlyArray<Pending>,
    savepoints: boolean,
    written: Map<AppendRequest | "batch", ProjectionRowWrite[]>,
  ): Promise<Array<{ ok: AppendResult[] } | { error: unknown }> | "again"> {
    // One round trip. The lock comes before any insert, so positions follow the lock order, which
    // is commit order. The NOTIFY is delivered at COMMIT (never on ROLLBACK) and wakes other
    // processes' readers. Savepoints ride along with the statements around them: the first with
    // BEGIN, each next one with the release of the one before, and COMMIT releases the last.
    await client.query(
      `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SELECT pg_advisory_xact_lock(hashtext('holdfast.append.${this.schema}')); NOTIFY ${commitChannel(this.schema)}${savepoints ? "; SAVEPOINT append_one" : ""}`,
    );
    const outcomes: Array<{ ok: AppendResult[] } | { error: unknown }> = [];
    let rest: ReadonlyArray<Pending> = batch;
    if (!savepoints) {
      const { decided, others } = splitBatch(batch);
      if (decided.length > 1) {
        let results: GroupOutcome[];
        try {
          const program = batchProgram(
            SQL,
            SQL.lists!,
            decided.map((p) => p.requests),
            inlineProjections,
            this.keyring,
            (rows) => written.set("batch", [...rows]),
          );
          results = await runAsync(program, (step) => execute(client, step, this.location));
        } catch (error) {
          this.options.onBatchRerun?.(error);
          return "again";
        }
        decided.forEach((pending, i) => {
          outcomes[batch.indexOf(pending)] = results[i]!;
        });
        rest = others;
      }
    }
    let savepointOpen = savepoints;
    for (const pending of rest) {
      if (savepoints && !savepointOpen) await client.query("SAVEPOINT append_one");
      savepointOpen = savepoints;
      let statements = 0;
      let statementFailed = false;
      const index = batch.indexOf(pending);
      try {
        const program = appendAllProgram(SQL, pending.requests, inlineProjections, this.keyring, (rows) =>
          written.set(pending.requests[0]!, [...(written.get(pending.requests[0]!) ?? []), ...rows]),
        );
        const ok = await runAsync(program, (step) => {
          statements += 1;
          return execute(client, step, this.location).catch((error: unknown) => {
            statementFailed = true;
            throw error;
          });
        });
        // Its outcome counts once its savepoint is released: one outcome per request, whatever fails.
        if (savepoints && pending !== batch.at(-1)) {
          await client.query("RELEASE SAVEPOINT append_one; SAVEPOINT append_one");
        }
        outcomes[index] = { ok };
      } catch (error) {
        if (savepoints) {
          await client.query("ROLLBACK TO SAVEPOINT append_one; RELEASE SAVEPOINT append_one");
          savepointOpen = false;
        } else if (batch.length > 1 && (statementFailed || statements > 1)) {
          return "again";
        }
        outcomes[index] = { error };
      }
    }
    return outcomes;
  }

  private runProgram<T>(client: pg.ClientBase, program: Program<T>): Promise<T> {
    return runAsync(program, (step) => execute(client, step, this.location));
  }

  private async transaction<T>(program: Program<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await checkout(this.pool);
    } catch (error) {
      throw this.unavailable(error, "nothing was changed");
    }
    try {
      await client.query("BEGIN");
      const result = await this.runProgram(client, program);
      await client.query("COMMIT");
      giveBack(client);
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      giveBack(client, true);
      throw refusedBeforeCommit(error) || isTagged(error)
        ? (outOfResources(error, this.location) ?? error)
        : this.unavailable(error, "whether the change was made is unknown; read it back");
    }
  }

  // ---------------------------------------------------------------- reads

  /**
   * Called after every commit of this journal that wrote events, and when another process's
   * commit may have become readable (LISTEN/NOTIFY, src/adapters/stores/postgres/notify.ts). The first
   * listener opens the LISTEN connection; it stays open, reconnecting after a drop, until close().
   * Notifications can be lost while it reconnects: readers keep polling too.
   */
  onCommitted(listener: (origin: CommitOrigin) => void): () => void {
    this.committedListeners.add(listener);
    if (!this.closed && !this.commitListener) {
      this.commitListener = new CommitListener({
        connection: this.pool.options,
        schema: this.schema,
        wake: () => {
          for (const wake of this.committedListeners) wake("elsewhere");
        },
      });
      this.commitListener.start();
    }
    return () => this.committedListeners.delete(listener);
  }

  async readStream(
    streamId: string,
    options: { readonly afterVersion?: number } = {},
  ): Promise<ReadonlyArray<RecordedEvent>> {
    const rows =
      options.afterVersion === undefined
        ? await this.rows<EventRow>(SQL.stream, [streamId])
        : await this.rows<EventRow>(SQL.streamAfter, [streamId, options.afterVersion]);
    return rows.map((row) => decodeRow(toStored(row), this.keyring));
  }

  async readStreamRows(streamId: string): Promise<ReadonlyArray<StoredRow>> {
    return (await this.rows<EventRow>(SQL.stream, [streamId])).map(toStored);
  }

  async readAll(options: {
    readonly after: number;
    readonly limit: number;
  }): Promise<ReadonlyArray<RecordedEvent>> {
    return (await this.readAllRows(options)).map((row) => decodeRow(row, this.keyring));
  }

  /**
   * Raw rows in position order, undecoded (for the audit). No visibility horizon: every transaction
   * that inserts events holds the journal's append lock from before its first insert until after
   * its commit is visible (PostgreSQL ends a transaction's visibility as running before it releases
   * its locks), so a later position always belongs to a later commit, and any snapshot sees the
   * committed events as a prefix of the position order. A page never runs ahead of a commit still
   * in flight, and a transaction outside holdfast, however long, holds nothing back
   * (docs/decisions/0011-storage-waits-modes-epochs-and-pruned-inputs.md, F9).
   */
  async readAllRows(options: { readonly after: number; readonly limit: number }): Promise<StoredRow[]> {
    return (await this.rows<EventRow>(SQL.all, [options.after, options.limit])).map(toStored);
  }

  async searchRuns(query: RunSearch): Promise<RunSearchResult> {
    this.assertOpen();
    return this.read(searchRunsProgram(query, this.keyring));
  }

  async countRuns(queries: ReadonlyArray<RunSearch>): Promise<ReadonlyArray<number>> {
    this.assertOpen();
    return this.read(countRunsProgram(queries));
  }

  async projectionPage(
    name: string,
    options: { readonly after: string | null; readonly limit: number },
  ): Promise<ReadonlyArray<StoredProjectionRow>> {
    this.assertOpen();
    return this.read(projectionPageProgram(name, options.after, options.limit, this.keyring));
  }

  /** Run a shared read-only program on the pool, one statement at a time. */
  private read<T>(program: Program<T>): Promise<T> {
    return runAsync(program, async (step) => {
      // The server's clock, as in a transaction: leases and presence are judged by one clock for
      // every worker, never by this host's (decision 0087).
      if (step.kind === "now") return Number((await this.row<{ now: string }>(NOW_MS, []))?.now);
      const rows = await this.rows(step.sql, step.params);
      return step.kind === "get" ? rows[0] : rows;
    });
  }

  // ---------------------------------------------------------------- maintenance

  /** Appends take this lock first thing; maintenance takes it too, so they wait for each other. */
  /**
   * Index the sealed runs rows the run index migration could not read (decision 0073), once, with
   * the key; a row the key does not open is left for `holdfast rebuild`, which says why.
   */
  private async fillSearch(keyring: Keyring): Promise<void> {
    if (!(await this.read(searchUnfilledProgram()))) return;
    const { unreadable } = await this.transaction(
      afterLock(this.lockAppends, fillSearchProgram(keyring, 16)),
    );
    warnUnreadable(this.location, unreadable);
  }

  private get lockAppends(): string {
    return `SELECT pg_advisory_xact_lock(hashtext('holdfast.append.${this.schema}'))`;
  }

  async rebuildProjections(): Promise<ReadonlyArray<ProjectionRebuild>> {
    this.assertOpen();
    return this.transaction(rebuildProgram(SQL, inlineProjections, this.lockAppends, this.keyring));
  }

  async prune(policy: RetentionPolicy & PruneOptions): Promise<PruneReport> {
    this.assertOpen();
    return pruneInBatches(
      { read: (program) => this.read(program), write: (program) => this.transaction(program) },
      SQL,
      inlineProjections,
      this.lockAppends,
      policy,
      this.keyring,
    );
  }

  async dropStream(streamId: string): Promise<DroppedStream | null> {
    this.assertOpen();
    return this.transaction(
      dropStreamProgram(SQL, inlineProjections, this.lockAppends, streamId, this.keyring, Date.now()),
    );
  }

  async streamHead(streamId: string): Promise<StreamHead | null> {
    const head = await this.row<HeadRow>(SQL.head, [streamId]);
    return head ? { streamId, version: Number(head.version), hash: head.hash } : null;
  }

  async streamHeads(streamIds: ReadonlyArray<string>): Promise<ReadonlyArray<StreamHead>> {
    if (streamIds.length === 0) return [];
    const rows = await this.rows<HeadRow & { stream_id: string }>(STREAM_HEADS, [streamIds]);
    return rows.map((row) => ({ streamId: row.stream_id, version: Number(row.version), hash: row.hash }));
  }

  async admission(chatId: string, inputId: string): Promise<Admission | null> {
    const row = await this.row<AdmissionRow>(SQL.admission, [chatId, inputId]);
    return row ? toAdmission(row) : null;
  }

  async prunedRun(runId: string): Promise<PrunedRunRecord | null> {
    const row = await this.row<PrunedRunRow>(SQL.prunedRun, [runId]);
    return row ? toPrunedRun(row) : null;
  }

  async activeRun(chatId: string): Promise<string | null> {
    return (await this.row<{ run_id: string }>(SQL.activeRun, [chatId]))?.run_id ?? null;
  }

  async activeRuns(): Promise<ReadonlyArray<string>> {
    return (await this.rows<{ run_id: string }>(SQL.activeRuns, [])).map((r) => r.run_id);
  }

  async queuePending(): Promise<ReadonlyArray<{ readonly chatId: string; readonly pending: number }>> {
    return (await this.rows<{ chat_id: string; pending: number }>(SQL.queuePending, [])).map((r) => ({
      chatId: r.chat_id,
      pending: Number(r.pending),
    }));
  }

  async dueWaits(nowMs: number, limit: number): Promise<ReadonlyArray<DueWait>> {
    return (await this.rows<DueWaitRow>(SQL.dueWaits, [nowMs, limit])).map(dueWaitOf);
  }

  async dueSchedules(nowMs: number, limit: number): Promise<ReadonlyArray<DueSchedule>> {
    return (await this.rows<DueScheduleRow>(SQL.dueSchedules, [nowMs, limit])).map(dueScheduleOf);
  }

  async idleQueues(): Promise<ReadonlyArray<string>> {
    return (await this.rows<{ chat_id: string }>(SQL.idleQueues, [])).map((r) => r.chat_id);
  }

  async projection<S>(name: string, key: string): Promise<S | null> {
    const row = await this.row<ProjectionRowSql>(SQL.projection, [name, key]);
    return row ? (JSON.parse(openStoredProjection(this.keyring, name, { key, ...row })) as S) : null;
  }

  async projectionRows<S>(name: string): Promise<ReadonlyArray<S>> {
    return (await this.rows<ProjectionRowSql & { key: string }>(SQL.projectionRows, [name])).map(
      (r) => JSON.parse(openStoredProjection(this.keyring, name, r)) as S,
    );
  }

  // ---------------------------------------------------------------- ownership

  /** Leases are measured on the database's clock, the one clock every worker shares. */
  async claim(
    runId: string,
    workerId: string,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<ClaimResult> {
    this.assertOpen();
    return this.transaction(
      claimProgram(SQL, runId, workerId, leaseMs, takeOverOf(options), options.trustExpiry),
    );
  }

  /** Several rows change: the append lock first, as for renewing and releasing (below). */
  async claimMany(
    runIds: ReadonlyArray<string>,
    workerId: string,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<ReadonlyMap<string, NonNullable<ClaimResult>>> {
    this.assertOpen();
    if (runIds.length === 0) return new Map();
    return this.transaction(
      afterLock(
        this.lockAppends,
        claimManyProgram(SQL, runIds, workerId, leaseMs, takeOverOf(options), options.trustExpiry),
      ),
    );
  }

  /*
   * Renewing and releasing change several claim rows at once, in the table's order, while an
   * append batch share-locks the claim rows of its fenced requests in request order: two
   * transactions each holding a row the other wants (a deadlock, and a failed batch). Both take
   * the append lock first, so they wait for a batch as a whole instead of row by row.
   */
  async renewClaims(workerId: string, leaseMs: number): Promise<ReadonlyArray<string>> {
    if (this.closed) return [];
    return this.transaction(afterLock(this.lockAppends, renewProgram(SQL, workerId, leaseMs)));
  }

  async releaseClaims(workerId: string, runIds?: ReadonlyArray<string>): Promise<void> {
    if (this.closed) return;
    const release = releaseProgram(SQL, workerId, runIds);
    await this.transaction(runIds?.length === 1 ? release : afterLock(this.lockAppends, release));
  }

  async currentClaim(runId: string): Promise<Claim | null> {
    const row = await this.row<ClaimRow>(SQL.claim, [runId]);
    return row ? toClaim(row) : null;
  }

  /** One transaction, on the database's clock: the claims and the presence rows as of one moment. */
  async liveness(): Promise<LivenessSnapshot> {
    this.assertOpen();
    return this.transaction(livenessProgram());
  }

  async announceRuntime(runtime: RuntimeAnnouncement, ttlMs: number): Promise<void> {
    if (this.closed) return;
    await this.transaction(announceProgram(runtime, ttlMs));
  }

  async withdrawRuntime(workerId: string): Promise<void> {
    if (this.closed) return;
    await this.transaction(withdrawProgram(workerId));
  }

  async alerts(
    options: { readonly undelivered?: boolean; readonly limit?: number } = {},
  ): Promise<ReadonlyArray<AlertRecord>> {
    this.assertOpen();
    return this.read(alertsProgram(options.undelivered ?? false, options.limit ?? 100));
  }

  async alertCounts(): Promise<AlertCounts> {
    this.assertOpen();
    return this.read(alertCountsProgram());
  }

  async recordAlerts(alerts: ReadonlyArray<NewAlert>): Promise<void> {
    if (this.closed || alerts.length === 0) return;
    await this.transaction(recordAlertsProgram(alerts));
  }

  async claimAlerts(workerId: string, leaseMs: number, limit: number): Promise<ReadonlyArray<AlertRecord>> {
    if (this.closed) return [];
    return this.transaction(claimAlertsProgram(workerId, leaseMs, limit));
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
    return this.transaction(alertAttemptedProgram(key, workerId, attempt));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Let queued appends commit before closing: nothing accepted is lost.
    while (this.queue.length > 0 || this.draining) await sleep(5);
    this.closed = true;
    await this.commitListener?.close();
    await this.pool.end();
  }

  // ---------------------------------------------------------------- helpers

  private async rows<R extends pg.QueryResultRow>(sql: string, params: ReadonlyArray<unknown>): Promise<R[]> {
    this.assertOpen();
    try {
      return (await this.pool.query<R>(prepared(sql, params))).rows;
    } catch (error) {
      // A FATAL (the server shutting down or restarting ended the session) is a lost connection too.
      if (!refusedBeforeCommit(error) && !isTagged(error)) throw this.unavailable(error, "nothing was read");
      throw outOfResources(error, this.location) ?? error;
    }
  }

  private async row<R extends pg.QueryResultRow>(
    sql: string,
    params: ReadonlyArray<unknown>,
  ): Promise<R | undefined> {
    return (await this.rows<R>(sql, params))[0];
  }

  private unavailable(error: unknown, consequence: string): JournalUnavailable {
    return new JournalUnavailable({
      location: this.location,
      reason: `the connection to PostgreSQL failed (${describe(error)}); ${consequence}`,
      hint: "Check that PostgreSQL is running and reachable, then retry.",
    });
  }

  private assertOpen(): void {
    if (this.closed) throw new JournalClosed({ location: this.location });
  }
}

/** Run `program` after taking `lock` in the same transaction. */
function* afterLock<T>(lock: string, program: Program<T>): Program<T> {
  yield { kind: "get", sql: lock, params: [] };
  return yield* program;
}

/** Typed holdfast errors (and unique violations) pass through unchanged. */
const isTagged = (error: unknown): boolean =>
  typeof error === "object" && error !== null && ("_tag" in error || error instanceof UniqueViolation);

const execute = async (client: pg.ClientBase, step: SqlStep, location: string): Promise<unknown> => {
  if (step.kind === "now") {
    const result = await client.query<{ now: string }>(NOW_MS);
    return Number(result.rows[0]?.now);
  }
  try {
    const result = await client.query(prepared(step.sql, step.params));
    if (step.kind === "get") return result.rows[0];
    if (step.kind === "all") return result.rows;
    return undefined;
  } catch (error) {
    const key = uniqueKeyOf(error);
    throw key ? new UniqueViolation(key, describe(error)) : (outOfResources(error, location) ?? error);
  }
};

const UNIQUE_KEYS: Record<string, UniqueKey> = {
  events_stream_version: "event-version",
  admissions_chat_input: "admission",
  one_active_run_per_chat: "active-run",
};

const uniqueKeyOf = (error: unknown): UniqueKey | null => {
  const { code, constraint } = error as { code?: unknown; constraint?: unknown };
  if (code !== "23505") return null;
  return UNIQUE_KEYS[String(constraint)] ?? "other";
};

/**
 * Apply the migrations not yet applied, in one transaction under an advisory lock, so workers
 * starting together migrate once. Returns the fingerprint key, made with the journal.
 */
const migrate = async (pool: pg.Pool, location: string, schema: string): Promise<Uint8Array> => {
  const client = await checkout(pool);
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`holdfast.migrate.${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    const tracked = await client.query<{ n: string }>(
      "SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'holdfast_migrations'",
      [schema],
    );
    if (Number(tracked.rows[0]?.n) === 0) {
      const others = await client.query<{ n: string }>(
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_schema = $1",
        [schema],
      );
      if (Number(others.rows[0]?.n) > 0) {
        throw new JournalUnavailable({
          location,
          reason: `the schema ${schema} holds tables but is not a holdfast journal`,
          hint: "Choose another schema with ?schema=name in the URL, or an empty one.",
        });
      }
      await client.query(
        `CREATE TABLE ${schema}.holdfast_migrations (id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
    }
    const applied = await client.query<{ id: number | null }>(
      `SELECT max(id) AS id FROM ${schema}.holdfast_migrations`,
    );
    const current = applied.rows[0]?.id ?? 0;
    if (current > LATEST_SCHEMA_VERSION) {
      throw new JournalTooNew({ location, found: current, supported: LATEST_SCHEMA_VERSION });
    }
    for (const migration of MIGRATIONS) {
      if (migration.id <= current) continue;
      await client.query(migration.sql(schema));
      await client.query(`INSERT INTO ${schema}.holdfast_migrations (id, name) VALUES ($1, $2)`, [
        migration.id,
        migration.name,
      ]);
      if (migration.id === 1) {
        await client.query(`INSERT INTO ${schema}.meta (key, value) VALUES ('fingerprint_key', $1)`, [
          randomBytes(32).toString("hex"),
        ]);
        await client.query(`INSERT INTO ${schema}.meta (key, value) VALUES ('created_at', $1)`, [
          new Date().toISOString(),
        ]);
      }
    }
    const key = await client.query<{ value: string }>(SQL.fingerprintKey);
    await client.query("COMMIT");
    const value = key.rows[0]?.value;
    if (!value) {
      throw new JournalUnavailable({
        location,
        reason: "the fingerprint key is missing",
        hint: "The journal was changed outside holdfast; restore a backup.",
      });
    }
    return Uint8Array.from(Buffer.from(value, "hex"));
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    giveBack(client);
  }
};
