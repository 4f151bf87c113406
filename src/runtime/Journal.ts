import type { AnyEvent, Keyring, RecordedEvent, StoredRow } from "../events/index.js";
import type { RunRow } from "../projections/index.js";

/** A waiting run's row in the due index (decision 0050). */
export interface DueWait {
  readonly runId: string;
  readonly dueAtMs: number;
  readonly wait: string;
  readonly callId: string;
}

/** A schedule's row in the schedule index (decision 0060): its next tick. */
export interface DueSchedule {
  readonly scheduleId: string;
  readonly dueAtMs: number;
}

/**
 * Expected stream version for an append (Emmett's sentinels): an exact version,
 * `"no-stream"` (must not exist), `"stream-exists"`, or `"any"`.
 */
export type ExpectedVersion = number | "no-stream" | "stream-exists" | "any";

/** A worker's right to write a run: appends carrying a fence are refused once the claim moved on. */
export interface Fence {
  readonly runId: string;
  readonly workerId: string;
  readonly epoch: number;
}

export interface AppendRequest {
  readonly streamId: string;
  readonly expectedVersion: ExpectedVersion;
  /** Already masked payloads. */
  readonly events: ReadonlyArray<AnyEvent>;
  readonly fence?: Fence;
  /**
   * With a fence: let the fenced claim go in the same transaction, after the events (a run that
   * settles with this append — recovery holding it — needs no release commit of its own). The row
   * keeps its epoch, as `releaseClaims` leaves it. Refused without a fence.
   */
  readonly releaseClaim?: boolean;
}

export interface AppendResult {
  readonly streamId: string;
  readonly nextVersion: number;
  readonly recorded: ReadonlyArray<RecordedEvent>;
}

export interface Admission {
  readonly chatId: string;
  readonly inputId: string;
  readonly digest: string;
  readonly runId: string;
}

/** Whose live lease a claim may take over: a worker known dead, or a test of the owner found. */
export interface ClaimOptions {
  readonly takeOverFrom?: string;
  readonly takeOverIf?: (ownerWorkerId: string) => boolean;
  /**
   * `false`: a lease that looks expired by the clock is still taken as live, because this process
   * saw its wall clock step lately and the owner may not have renewed on the new clock yet
   * (decision 0071). Default `true`.
   */
  readonly trustExpiry?: boolean;
}

export interface Claim {
  readonly runId: string;
  readonly workerId: string;
  readonly epoch: number;
  readonly leaseUntil: number;
}

/** Where a stream stands: its last version and hash. */
export interface StreamHead {
  readonly streamId: string;
  readonly version: number;
  readonly hash: string;
}

/** Where a run sits in the runs list's order (newest admitted first): a keyset page's bound. */
export interface RunSearchKey {
  readonly createdAt: string;
  readonly runId: string;
}

/**
 * A search of the run index (decision 0073). Every field narrows; none: every run. Times are ISO
 * 8601 (UTC, as `Date.toISOString` writes them), `from` inclusive, `to` exclusive.
 */
export interface RunSearch {
  /** Run ids starting with this. */
  readonly idPrefix?: string;
  /** The chat's index keys: its id, and on a sealed journal its keyed digest under each key. */
  readonly chatKeys?: ReadonlyArray<string>;
  /** An agent by name (any version), or by name and version. */
  readonly agent?: { readonly name: string; readonly version?: string };
  /** Any of these statuses. */
  readonly statuses?: ReadonlyArray<string>;
  /** Not these runs (the stalled search leaves out the runs a live owner runs). */
  readonly notRunIds?: ReadonlyArray<string>;
  /** Which time `from` and `to` bound: admission (default) or the last change. */
  readonly timeOf?: "created" | "updated";
  readonly from?: string;
  readonly to?: string;
  /** The page after this run (older), or… */
  readonly after?: RunSearchKey;
  /** …the page before it (newer). */
  readonly before?: RunSearchKey;
  readonly limit: number;
}

/** One page of a run search: each run's key in the order and its runs row; whether more lie beyond. */
export interface RunSearchResult {
  readonly rows: ReadonlyArray<{ readonly key: RunSearchKey; readonly row: RunRow }>;
  /** Whether runs lie beyond the page in the direction read (older for `after`, newer for `before`). */
  readonly more: boolean;
}

/** A stored projection row as the database holds it (the value undecoded: the audit compares it). */
export interface StoredProjectionRow {
  readonly key: string;
  /** The row's JSON text. */
  readonly value: string;
  /** The position of the last event that changed the row. */
  readonly position: number;
}

/** What `rebuildProjections` did to one projection. */
export interface ProjectionRebuild {
  readonly name: string;
  /** Rows written from the events. */
  readonly rows: number;
  /** Whether the stored rows differed from the rebuilt ones (any row added, removed or changed). */
  readonly changed: boolean;
}

/** Which finished runs retention keeps: the newest `keepRuns`, and every run finished within `keepDays`. */
export interface RetentionPolicy {
  readonly keepRuns: number;
  readonly keepDays: number;
}

/** One run removed (or, on a dry run, to be removed) by retention, with the head its stream had. */
export interface PrunedRun {
  readonly runId: string;
  readonly chatId: string;
  readonly status: string;
  readonly streamId: string;
  readonly version: number;
  readonly hash: string;
  /** The position of the stream's last event. */
  readonly position: number;
  /** When the run's last event was recorded. */
  readonly finishedAt: string;
}

/**
 * What is left of a run retention removed (law 6): enough to answer a re-sent input without running
 * it again. Its admission (ids, digest, run id) stays too.
 */
export interface PrunedRunRecord {
  readonly runId: string;
  readonly chatId: string;
  /** The status its events folded to when it was pruned: `completed`, `failed` or `stopped`. */
  readonly status: string;
  /** `run.completed`'s `outputDigest`; null for a run that did not complete. */
  readonly outputDigest: string | null;
  /** When retention removed it (ISO 8601). */
  readonly prunedAt: string;
}

/** What retention removed (or, on a dry run, would remove). */
export interface PruneReport {
  readonly dryRun: boolean;
  readonly pruned: ReadonlyArray<PrunedRun>;
  /** Finished runs kept by the policy (newest, recent, or a child whose parent is kept). */
  readonly kept: number;
  /** Runs the policy selected but retention left alone, and why (their events disagree with the caches). */
  readonly skipped: ReadonlyArray<{ readonly runId: string; readonly reason: string }>;
  /**
   * The last `retention.pruned` event written to the `system` stream; null on a dry run or when
   * nothing went.
   */
  readonly recorded: { readonly streamId: string; readonly version: number } | null;
  /** Every `retention.pruned` written, in order: one per batch (one transaction each). */
  readonly records: ReadonlyArray<{ readonly streamId: string; readonly version: number }>;
}

/** How a prune runs, beside the policy. */
export interface PruneOptions {
  /** Write nothing; report what would go. */
  readonly dryRun?: boolean;
  /** The clock the policy's `keepDays` counts from (ms since the epoch). */
  readonly now?: number;
  /**
   * Runs removed per transaction (default 50; and at most 500 events, unless one run alone has
   * more). Each batch takes the append lock and lets it go, so appends and lease renewals wait
   * for one batch, never for the whole prune.
   */
  readonly batchRuns?: number;
  /** Called after each committed batch: runs removed so far, of those the policy selected. */
  readonly onBatch?: (progress: { readonly pruned: number; readonly selected: number }) => void;
}

/** A stream removed by {@link Journal.dropStream}: its head, and the `retention.pruned` that records it. */
export interface DroppedStream {
  readonly streamId: string;
  readonly version: number;
  readonly hash: string;
  readonly position: number;
  readonly recorded: { readonly streamId: string; readonly version: number };
}

/**
 * Where a journal stood after a commit, kept by the libSQL journal outside its database file (the
 * head anchor, docs/decisions/0012-head-anchor-and-read-only-opens.md): the last committed event's
 * position and hash. A journal that no longer holds that event has lost commits.
 */
export interface HeadAnchor {
  readonly position: number;
  readonly streamId: string;
  readonly version: number;
  readonly hash: string;
}

/** What a journal's head anchor says: none kept (PostgreSQL, or not made yet), one, or unreadable. */
export type AnchorReading =
  | { readonly kind: "none" }
  | { readonly kind: "anchored"; readonly anchor: HeadAnchor; readonly path: string }
  | { readonly kind: "damaged"; readonly path: string; readonly detail: string };

/**
 * A runtime that said it is open on this journal (the runtime registry, decision 0053): which
 * agents it can continue runs of, and until when its word holds. Rows of runtimes that died stay
 * until they are long expired: they say when the owner was last seen.
 */
export interface RuntimePresence {
  readonly workerId: string;
  readonly host: string;
  readonly pid: number;
  /** The agents it runs, as `name@version`. */
  readonly agents: ReadonlyArray<string>;
  /** When it opened (ms since the epoch, the journal's clock). */
  readonly startedAt: number;
  /** Its last heartbeat (ms since the epoch, the journal's clock). */
  readonly seenAt: number;
  /** When its presence runs out unless renewed (ms since the epoch, the journal's clock). */
  readonly expiresAt: number;
  /** How often it runs a recovery pass (a `holdfast worker`); null: only when it opens, or is asked to. */
  readonly recoversEveryMs: number | null;
}

/** What a runtime announces of itself; the journal adds the times. */
export type RuntimeAnnouncement = Omit<RuntimePresence, "startedAt" | "seenAt" | "expiresAt">;

/**
 * Who owns what, read at once (decision 0052): every live claim, every runtime's presence row, and
 * the journal's clock the leases are measured by. Readers only report from it; they never claim.
 */
export interface LivenessSnapshot {
  /** The journal's clock at the read (ms since the epoch): leases are measured by it. */
  readonly now: number;
  /** The claims that have an owner (released rows are left out). */
  readonly claims: ReadonlyArray<Claim>;
  readonly runtimes: ReadonlyArray<RuntimePresence>;
}

/**
 * An alert about a run (decision 0065): held, stalled or crash-looped, keyed `<runId>@<version>`
 * (`…/stalled` for a stalled run) so that one alert is recorded, and sent, once per journal.
 */
export interface NewAlert {
  readonly key: string;
  readonly runId: string;
  readonly kind: "held" | "stalled" | "crash-loop" | "approval";
  /** The JSON body sent, built from ids, codes and times only (never a payload or a secret). */
  readonly body: string;
}

/** One delivery attempt of an alert. `status` is the HTTP status, when an answer came. */
export interface AlertTry {
  readonly at: number;
  readonly ok: boolean;
  readonly status?: number;
  readonly error?: string;
}

/** An alert as the journal keeps it: its body and every delivery attempt. Times: ms since the epoch. */
export interface AlertRecord extends NewAlert {
  readonly createdAt: number;
  readonly attempts: number;
  readonly tries: ReadonlyArray<AlertTry>;
  /** When the next attempt is due (while neither delivered nor given up). */
  readonly nextAt: number;
  readonly deliveredAt: number | null;
  /** When the sender stopped trying (its attempts ran out): the alert was not delivered. */
  readonly gaveUpAt: number | null;
  readonly lastError: string | null;
}

/** How many alerts are delivered, still being tried, and given up on. */
export interface AlertCounts {
  readonly delivered: number;
  readonly pending: number;
  readonly failed: number;
}

/** Where a commit announced by {@link JournalReader.onCommitted} may come from. */
export type CommitOrigin = "here" | "elsewhere";

/**
 * The read half of the store port: what watchers, auditors and operators' views need. A reader
 * opened read-only (`openReader`, `openStoreReader`) has only this: it never writes, claims or
 * recovers, so it can be pointed at a live journal or at an evidence copy alike.
 */
export interface JournalReader {
  readonly engine: string;
  /** Where the journal lives, safe to print (passwords masked). */
  readonly location: string;
  /** The key for call fingerprints, made when the journal was created. */
  readonly fingerprintKey?: Uint8Array;
  /**
   * The payload keys from the environment (`HOLDFAST_ENCRYPTION_KEY`, `HOLDFAST_ENCRYPTION_OLD_KEYS`),
   * or null: new events are sealed with the current key; reads open sealed fields with any of them.
   */
  readonly keyring: Keyring | null;
  /**
   * One stream's events, decoded, in version order; with `afterVersion`, only those after it (a
   * reader that holds the first ones already: history never changes, so the two make the stream).
   */
  readStream(
    streamId: string,
    options?: { readonly afterVersion?: number },
  ): Promise<ReadonlyArray<RecordedEvent>>;
  /** One stream's stored rows, undecoded, in version order (recovery verifies the chain over them). */
  readStreamRows(streamId: string): Promise<ReadonlyArray<StoredRow>>;
  /**
   * Be told after each commit of this journal object that wrote events, so readers wake at once;
   * on PostgreSQL also when another process's commit may have become readable (LISTEN/NOTIFY).
   * A call may come more than once; readers re-read from their cursor, and still poll for what was
   * not announced. `origin` says where the commit may come from: `here` for this journal object's
   * own commits, `elsewhere` when another process's commit may have become readable (PostgreSQL's
   * NOTIFY, which also announces this process's commits). Returns the unsubscribe function.
   */
  onCommitted(listener: (origin: CommitOrigin) => void): () => void;
  /** Events with position > `after`, in position order, at most `limit`. */
  readAll(options: { readonly after: number; readonly limit: number }): Promise<ReadonlyArray<RecordedEvent>>;
  /**
   * Stored rows as the database holds them, undecoded, in position order: for the audit, which must
   * see a row that does not decode as a finding rather than fail on it.
   */
  readAllRows(options: { readonly after: number; readonly limit: number }): Promise<ReadonlyArray<StoredRow>>;
  streamHead(streamId: string): Promise<StreamHead | null>;
  /** The heads of several streams in one read; a stream with no events is left out. */
  streamHeads(streamIds: ReadonlyArray<string>): Promise<ReadonlyArray<StreamHead>>;
  admission(chatId: string, inputId: string): Promise<Admission | null>;
  /**
   * A run retention removed: its final status, output digest and when it went; null for a run
   * that was never pruned (whether or not it exists). With {@link Journal.admission} it answers a
   * re-sent input of a pruned run without running anything.
   */
  prunedRun(runId: string): Promise<PrunedRunRecord | null>;
  /** The active (not finished) run of a chat, if any. */
  activeRun(chatId: string): Promise<string | null>;
  /** Every active run: running, interrupted or held. */
  activeRuns(): Promise<ReadonlyArray<string>>;
  /** The queue index (decision 0045): each chat with queued inputs pending, and how many. */
  queuePending(): Promise<ReadonlyArray<{ readonly chatId: string; readonly pending: number }>>;
  /**
   * Chats with queued inputs pending and no active run, by the `queue_pending` index (decision
   * 0045): what a recovery pass admits when the process that ended a chat's run died before.
   */
  idleQueues(): Promise<ReadonlyArray<string>>;
  /**
   * Waiting runs due at `nowMs` or before, earliest first, at most `limit`, by the due index
   * (decision 0050): what a waker claims and wakes.
   */
  dueWaits(nowMs: number, limit: number): Promise<ReadonlyArray<DueWait>>;
  /**
   * Active schedules whose next tick is at `nowMs` or before, earliest first, at most `limit`, by the
   * schedule index (decision 0060): what a tick pass handles.
   */
  dueSchedules(nowMs: number, limit: number): Promise<ReadonlyArray<DueSchedule>>;
  projection<S>(name: string, key: string): Promise<S | null>;
  projectionRows<S>(name: string): Promise<ReadonlyArray<S>>;
  /**
   * One page of runs from the run index (decision 0073), newest admitted first, keyset-paged:
   * reads the page's rows only, never every run.
   */
  searchRuns(query: RunSearch): Promise<RunSearchResult>;
  /**
   * How many runs match each search (paging ignored), each counted up to its `limit` + 1 (so a
   * count past `limit` says "more than `limit`"): one read. A count reads the rows it counts, so
   * `limit` bounds its cost (decision 0090).
   */
  countRuns(queries: ReadonlyArray<RunSearch>): Promise<ReadonlyArray<number>>;

  /** One page of a projection's stored rows in key order, keys after `after` (null: from the start). */
  projectionPage(
    name: string,
    options: { readonly after: string | null; readonly limit: number },
  ): Promise<ReadonlyArray<StoredProjectionRow>>;
  currentClaim(runId: string): Promise<Claim | null>;
  /** Every owned claim and every runtime's presence, with the journal's clock, in one read. */
  liveness(): Promise<LivenessSnapshot>;
  /**
   * Alerts recorded (decision 0065), newest first: all, or only those not delivered (being tried,
   * or given up on), at most `limit` (default 100).
   */
  alerts(options?: {
    readonly undelivered?: boolean;
    readonly limit?: number;
  }): Promise<ReadonlyArray<AlertRecord>>;
  /** How many alerts are delivered, pending and given up on. */
  alertCounts(): Promise<AlertCounts>;
  /**
   * The head anchor kept outside the database, read now (libSQL); absent or `none` where the
   * engine keeps none. The audit compares the log with it.
   */
  headAnchor?(): Promise<AnchorReading>;
  close(): Promise<void>;
}

/**
 * The store port. Small on purpose: append with expected version (group-committed), read a stream,
 * read all after a position, plus the few indexed look-ups the runtime needs. Every engine enforces
 * concurrency in the database (unique keys, one write transaction per batch).
 */
export interface Journal extends JournalReader {
  /** The key for call fingerprints, made when the journal was created. */
  readonly fingerprintKey: Uint8Array;
  /**
   * Append events to one stream. Resolves after the commit that holds them. Fails with
   * `WrongExpectedVersion`, `ActiveRunExists`, an admission conflict, or `FencedOut`, writing nothing.
   */
  append(request: AppendRequest): Promise<AppendResult>;
  /** Append to several streams in one transaction: all requests are written, or none. */
  appendAll(requests: ReadonlyArray<AppendRequest>): Promise<AppendResult[]>;
  /**
   * Recompute every inline projection from position 0 and replace the stored rows, in one write
   * transaction (appends wait for it). Nothing changes when an event does not decode, or when a
   * run's machine does not accept one of its events (`RebuildRefused`).
   */
  rebuildProjections(): Promise<ReadonlyArray<ProjectionRebuild>>;
  /**
   * Remove finished runs the policy does not keep, in batches of up to `batchRuns` runs, one write
   * transaction each: `retention.pruned` (each removed stream's id and head) is appended to the
   * `system` stream first, then the batch's events, guard rows and claims go, each run's final
   * status and output digest are kept for {@link Journal.prunedRun}, and the projection rows the
   * batch's events made are removed or folded again from what remains. Admissions stay (law 6:
   * retention never reopens an input). Active, held and needs-attention runs are never removed.
   * `dryRun` writes nothing and reports what would go.
   */
  prune(policy: RetentionPolicy & PruneOptions): Promise<PruneReport>;
  /**
   * Remove a LangGraph thread's stream (`langgraph-…`) in one write transaction, leaving the same
   * sealed record retention leaves: `retention.pruned` with the stream's head in the `system` stream,
   * then the events and the projection rows they made go. Null when the stream does not exist.
   */
  dropStream(streamId: string): Promise<DroppedStream | null>;
  /**
   * Take or renew ownership of a run. Succeeds when the run is unclaimed, the lease expired, or
   * `workerId` already holds it; a take-over increments the epoch. Returns null when another
   * worker's lease is live — unless that worker is `takeOverFrom`, known to be dead, or
   * `takeOverIf(owner)` says so (asked inside the claim's transaction: one commit for the claim,
   * the check and the take-over).
   */
  claim(
    runId: string,
    workerId: string,
    leaseMs: number,
    options?: ClaimOptions,
  ): Promise<(Claim & { readonly previous: Claim | null }) | null>;
  /**
   * Claim several runs in one write transaction, each as {@link Journal.claim} would (a recovery
   * pass claims the runs it is about to inspect together instead of one commit each). Returns the
   * runs claimed; a run missing from the map is held by another live worker.
   */
  claimMany(
    runIds: ReadonlyArray<string>,
    workerId: string,
    leaseMs: number,
    options?: ClaimOptions,
  ): Promise<ReadonlyMap<string, Claim & { readonly previous: Claim | null }>>;
  /** Extend every lease this worker still holds; returns the runs renewed (not those taken over). */
  renewClaims(workerId: string, leaseMs: number): Promise<ReadonlyArray<string>>;
  /**
   * Give up the worker's claims (all, or those of `runIds`). A released claim keeps its epoch, so
   * the run's next claim is at the next epoch and no earlier fence matches again; it is no claim
   * for {@link Journal.currentClaim}.
   */
  releaseClaims(workerId: string, runIds?: ReadonlyArray<string>): Promise<void>;
  /**
   * Say this runtime is open, with its agents, until `ttlMs` from now on the journal's clock (the
   * runtime registry, decision 0053); renewed by the runtime's heartbeat. Also removes presence
   * rows that ran out long ago.
   */
  announceRuntime(runtime: RuntimeAnnouncement, ttlMs: number): Promise<void>;
  /** Remove this runtime's presence row (it closes). */
  withdrawRuntime(workerId: string): Promise<void>;
  /** Record alerts not recorded yet (by key); an alert already recorded is left as it is. */
  recordAlerts(alerts: ReadonlyArray<NewAlert>): Promise<void>;
  /**
   * Claim up to `limit` alerts due for an attempt, for `leaseMs` on the journal's clock: only the
   * claimer sends them, and a claimer that dies lets them go when its claim runs out.
   */
  claimAlerts(workerId: string, leaseMs: number, limit: number): Promise<ReadonlyArray<AlertRecord>>;
  /**
   * Record one delivery attempt of an alert this worker claimed: delivered, to be tried again in
   * `retryInMs`, or (`retryInMs` null and not ok) given up on. False when the claim was lost.
   */
  alertAttempted(
    key: string,
    workerId: string,
    attempt: {
      readonly ok: boolean;
      readonly status?: number;
      readonly error?: string;
      readonly retryInMs: number | null;
    },
  ): Promise<boolean>;
}
