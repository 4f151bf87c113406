import { createHash } from "node:crypto";
import {
  type AnyEvent,
  canonicalJson,
  decodeRow,
  GRAPH_STREAM_PREFIX,
  type Keyring,
  openProjectionValue,
  type RecordedEvent,
  runStreamId,
  SealError,
  type StoredRow,
  SYSTEM_STREAM,
} from "../../../events/index.js";
import type { AnyProjection } from "../../../projections/index.js";
import type {
  DroppedStream,
  ProjectionRebuild,
  PrunedRun,
  PruneOptions,
  PruneReport,
  RetentionPolicy,
  StoredProjectionRow,
} from "../../../runtime/Journal.js";
import {
  checkPrunable,
  parentRunOf,
  pruneOrder,
  type RetentionCandidate,
  selectForPruning,
} from "../../../runtime/retention.js";
import { DEFAULT_PRUNE_BATCH, PRUNE_BATCH_EVENTS } from "../../../runtime/retentionDefaults.js";
import { appendAllProgram, applyProjections } from "./append.js";
import { all, get, type Program, run } from "./program.js";
import { RunFoldCheck } from "./RunFoldCheck.js";
import { type EventRow, toStored } from "./rows.js";
import { deleteSearchRows, SEARCH_SQL, SEARCHED_PROJECTION } from "./search.js";
import type { Statements } from "./statements.js";

/**
 * Values bound per statement by the set-wise statements of a prune batch: few statements per batch
 * (each a round trip on PostgreSQL), well under SQLite's 32,766 bound values.
 */
const PER_STATEMENT = 200;

const chunksOf = <T>(list: ReadonlyArray<T>, size: number): T[][] => {
  const chunks: T[][] = [];
  for (let from = 0; from < list.length; from += size) chunks.push(list.slice(from, from + size));
  return chunks;
};

/** `?, ?, …`: the placeholders of an `IN` list of `count` values. */
const placeholders = (count: number): string => Array.from({ length: count }, () => "?").join(", ");

const EVENT_COLUMNS =
  "position, stream_id, version, event_id, recorded_at, prev_hash, hash, schema_version, data";

/**
 * The SQL of the maintenance programs (rebuild, retention), the same text on both engines. Reads
 * here run inside a transaction that holds the append lock, so every committed event is final and
 * no visibility horizon is needed (unlike `readAll`).
 */
export const MAINTENANCE = {
  eventsPage: `SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`,
  streamRows: `SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id = ? ORDER BY version`,
  projectionFirst: "SELECT key, value, position FROM projections WHERE name = ? ORDER BY key LIMIT ?",
  projectionAfter:
    "SELECT key, value, position FROM projections WHERE name = ? AND key > ? ORDER BY key LIMIT ?",
  deleteProjection: "DELETE FROM projections WHERE name = ?",
  deleteProjectionRow: "DELETE FROM projections WHERE name = ? AND key = ?",
  /** Every run with its guard row and its stream's head. */
  candidates:
    "SELECT g.run_id, g.chat_id, g.active, e.version, e.hash, e.position, e.recorded_at FROM run_guard g JOIN events e ON e.stream_id = 'run-' || g.run_id AND e.version = (SELECT max(x.version) FROM events x WHERE x.stream_id = e.stream_id)",
  markRetention: "INSERT INTO meta (key, value) VALUES ('retention_in_progress', ?)",
  unmarkRetention: "DELETE FROM meta WHERE key = 'retention_in_progress'",
  deleteEvents: "DELETE FROM events WHERE stream_id = ?",
  /** The runs of `count` chats (every run has a guard row until retention removes it). */
  runsOfChats: (count: number) =>
    `SELECT run_id, chat_id FROM run_guard WHERE chat_id IN (${placeholders(count)})`,
  /** The rows of `count` streams, stream by stream, each in version order. */
  streamsRows: (count: number) =>
    `SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id IN (${placeholders(count)}) ORDER BY stream_id, version`,
  deleteStreams: (count: number) => `DELETE FROM events WHERE stream_id IN (${placeholders(count)})`,
  // No deleteAdmission: an admission outlives its run (law 6), or the same input would run again.
  recordPrunedMany: (count: number) =>
    `INSERT INTO pruned_runs (run_id, chat_id, status, output_digest, pruned_at) VALUES ${Array.from({ length: count }, () => "(?, ?, ?, ?, ?)").join(", ")}`,
  deleteGuards: (count: number) => `DELETE FROM run_guard WHERE run_id IN (${placeholders(count)})`,
  deleteClaims: (count: number) => `DELETE FROM claims WHERE run_id IN (${placeholders(count)})`,
  /** The head (last version and its hash) of each of `count` streams. */
  headsOf: (count: number) =>
    `SELECT stream_id, version, hash FROM events e WHERE stream_id IN (${placeholders(count)}) AND version = (SELECT max(x.version) FROM events x WHERE x.stream_id = e.stream_id)`,
  projectionRowsOf: (count: number) =>
    `SELECT key, value, position FROM projections WHERE name = ? AND key IN (${placeholders(count)})`,
  deleteProjectionRows: (count: number) =>
    `DELETE FROM projections WHERE name = ? AND key IN (${placeholders(count)})`,
} as const;

/** Events are read this many at a time: a rebuild streams the log through bounded memory. */
const PAGE = 500;

/** A projection row's value and position as SQL returns them. */
export interface ProjectionRowSql {
  readonly value: string;
  readonly position: number | string;
}

/** The JSON text of a stored projection row, opened when sealed (its position is bound in). */
export const openStoredProjection = (
  ring: Keyring | null,
  name: string,
  row: ProjectionRowSql & { readonly key: string },
): string => openProjectionValue(ring, { name, key: row.key, position: Number(row.position) }, row.value);

/** A stored projection row, its value opened when sealed. */
const toProjectionRow = (
  name: string,
  row: ProjectionRowSql & { readonly key: string },
  ring: Keyring | null,
): StoredProjectionRow => ({
  key: row.key,
  value: openStoredProjection(ring, name, row),
  position: Number(row.position),
});

const canonicalValue = (text: string): string => {
  try {
    return canonicalJson(JSON.parse(text));
  } catch {
    return text;
  }
};

/** One page of a projection's stored rows, in key order. */
export function* projectionPageProgram(
  name: string,
  after: string | null,
  limit: number,
  ring: Keyring | null,
): Program<StoredProjectionRow[]> {
  const rows =
    after === null
      ? yield* all<ProjectionRowSql & { key: string }>(MAINTENANCE.projectionFirst, [name, limit])
      : yield* all<ProjectionRowSql & { key: string }>(MAINTENANCE.projectionAfter, [name, after, limit]);
  return rows.map((row) => toProjectionRow(name, row, ring));
}

/**
 * A digest and count of a projection's stored rows, read page by page. Values are compared as
 * canonical JSON: an inline row keeps the key order of the live event, a rebuilt one that of the
 * stored (canonical) payload, and that difference is not a change. A sealed row that does not open
 * (changed, put back from another position, or under a key no longer configured) counts by its
 * stored text: a rebuild is what replaces it, so it must not stop there.
 */
function* storedDigest(name: string, ring: Keyring | null): Program<{ digest: string; rows: number }> {
  const hash = createHash("sha256");
  let rows = 0;
  let after: string | null = null;
  for (;;) {
    const page: ReadonlyArray<ProjectionRowSql & { key: string }> =
      after === null
        ? yield* all<ProjectionRowSql & { key: string }>(MAINTENANCE.projectionFirst, [name, PAGE])
        : yield* all<ProjectionRowSql & { key: string }>(MAINTENANCE.projectionAfter, [name, after, PAGE]);
    for (const row of page) {
      let value: string;
      try {
        value = canonicalValue(openStoredProjection(ring, name, row));
      } catch (error) {
        if (!(error instanceof SealError)) throw error;
        value = `unopened\u0000${row.value}`;
      }
      hash.update(`${row.key}\u0000${value}\u0000${Number(row.position)}\n`);
    }
    rows += page.length;
    const last = page.at(-1);
    if (!last || page.length < PAGE) break;
    after = last.key;
  }
  return { digest: hash.digest("hex"), rows };
}

/**
 * Replace every inline projection with a fold of the events from position 0, using the write
 * path's own projection step, so a rebuilt row is what the inline update would have written.
 * Every run stream is folded through its machine on the way (`RunFoldCheck`). The caller holds
 * the write transaction; an event that does not decode, or that its run's machine does not
 * accept (`RebuildRefused`), throws and undoes it all.
 */
function* rebuildBody(
  sql: Statements,
  projections: ReadonlyArray<AnyProjection>,
  ring: Keyring | null,
): Program<ProjectionRebuild[]> {
  const before = new Map<string, string>();
  for (const projection of projections)
    before.set(projection.name, (yield* storedDigest(projection.name, ring)).digest);
  for (const projection of projections) yield* run(MAINTENANCE.deleteProjection, [projection.name]);
  // The run index follows the runs rows: rebuilt with them (decision 0073).
  if (projections.some((p) => p.name === SEARCHED_PROJECTION)) {
    yield* run(SEARCH_SQL.deleteAll, []);
    yield* run(SEARCH_SQL.unmarkUnfilled, []);
  }
  const folds = new RunFoldCheck();
  let after = 0;
  for (;;) {
    const rows = yield* all<EventRow>(MAINTENANCE.eventsPage, [after, PAGE]);
    const recorded = rows.map((row) => decodeRow(toStored(row), ring));
    for (const event of recorded) folds.accept(event);
    if (recorded.length > 0) yield* applyProjections(sql, recorded, projections, ring);
    const last = recorded.at(-1);
    if (!last || rows.length < PAGE) break;
    after = last.position;
  }
  const report: ProjectionRebuild[] = [];
  for (const projection of projections) {
    const now = yield* storedDigest(projection.name, ring);
    report.push({
      name: projection.name,
      rows: now.rows,
      changed: now.digest !== before.get(projection.name),
    });
  }
  return report;
}

/**
 * `lockAppends`: the statement that makes concurrent appends wait (PostgreSQL's advisory append
 * lock); null where the transaction itself is exclusive (libSQL's `BEGIN IMMEDIATE`).
 */
export function* rebuildProgram(
  sql: Statements,
  projections: ReadonlyArray<AnyProjection>,
  lockAppends: string | null,
  ring: Keyring | null,
): Program<ProjectionRebuild[]> {
  if (lockAppends) yield* get(lockAppends, []);
  return yield* rebuildBody(sql, projections, ring);
}

interface CandidateRow {
  readonly run_id: string;
  readonly chat_id: string;
  readonly active: number | string;
  readonly version: number | string;
  readonly hash: string;
  readonly position: number | string;
  readonly recorded_at: string;
}

/** `run.completed`'s output digest, read from the end of a run's events; null when it did not complete. */
const outputDigestOf = (events: ReadonlyArray<RecordedEvent>): string | null => {
  for (let i = events.length - 1; i >= 0; i--) {
    const { event } = events[i]!;
    if (event.type === "run.completed") return event.outputDigest;
    if (event.type === "run.failed" || event.type === "run.stopped") return null;
  }
  return null;
};

/**
 * The finished runs a policy removes, newest first as reports list them, and how many it keeps.
 * Read without the append lock: each batch checks its runs against their events, and then their
 * heads again under the lock.
 */
export function* pruneSelectionProgram(
  policy: RetentionPolicy & { readonly now: number },
): Program<{ readonly prune: ReadonlyArray<RetentionCandidate>; readonly kept: number }> {
  const candidates: RetentionCandidate[] = (yield* all<CandidateRow>(MAINTENANCE.candidates, [])).map(
    (row) => ({
      runId: row.run_id,
      chatId: row.chat_id,
      active: Number(row.active) === 1,
      version: Number(row.version),
      hash: row.hash,
      position: Number(row.position),
      recordedAt: row.recorded_at,
    }),
  );
  return selectForPruning(candidates, policy, policy.now);
}

/** A run a batch checked and may remove: its head, final status and events. */
interface Removable extends PrunedRun {
  readonly events: ReadonlyArray<RecordedEvent>;
}

/** The runs of a batch that passed their checks, and those left alone with the reason. */
export interface CheckedBatch {
  readonly removable: ReadonlyArray<Removable>;
  readonly skipped: ReadonlyArray<{ readonly runId: string; readonly reason: string }>;
}

/** A child goes only with its parent or after it: a run whose parent stays, stays. */
const parentStays = (runId: string, chatId: string, stays: Set<string>) => {
  const parent = parentRunOf(chatId);
  if (parent === null || !stays.has(parent)) return null;
  stays.add(runId);
  return { runId, reason: `its parent run ${parent} was left alone, so it stays with it` };
};

/**
 * Check each run of a batch against its own events (`checkPrunable`), with no lock: decoding,
 * verifying and folding is the slow part of a prune, and a stream whose head has not moved since
 * has not changed, so the batch under the lock only compares heads (`pruneBatchProgram`).
 */
export function* pruneCheckProgram(
  batch: ReadonlyArray<RetentionCandidate>,
  leftAlone: ReadonlySet<string>,
  ring: Keyring | null,
): Program<CheckedBatch> {
  const removable: Removable[] = [];
  const skipped: Array<{ runId: string; reason: string }> = [];
  const stays = new Set(leftAlone);
  const rowsOf = new Map<string, StoredRow[]>();
  for (const chunk of chunksOf(batch, PER_STATEMENT)) {
    const ids = chunk.map((c) => runStreamId(c.runId));
    for (const row of yield* all<EventRow>(MAINTENANCE.streamsRows(ids.length), ids)) {
      const stored = toStored(row);
      const rows = rowsOf.get(stored.streamId);
      if (rows) rows.push(stored);
      else rowsOf.set(stored.streamId, [stored]);
    }
  }
  for (const candidate of batch) {
    const child = parentStays(candidate.runId, candidate.chatId, stays);
    if (child) {
      skipped.push(child);
      continue;
    }
    const streamId = runStreamId(candidate.runId);
    const checked = checkPrunable(rowsOf.get(streamId) ?? [], candidate, ring);
    if ("problem" in checked) {
      stays.add(candidate.runId);
      skipped.push({ runId: candidate.runId, reason: checked.problem });
      continue;
    }
    removable.push({
      runId: candidate.runId,
      chatId: candidate.chatId,
      status: checked.status,
      streamId,
      version: candidate.version,
      hash: candidate.hash,
      position: candidate.position,
      finishedAt: candidate.recordedAt,
      events: checked.events,
    });
  }
  return { removable, skipped };
}

const asPruned = ({ events: _events, ...run }: Removable): PrunedRun => run;

/**
 * Update the projection rows the removed runs' events made, and only those: a row of one stream
 * goes with it; a row the runs of a chat share (`drawsOn`) stands unless it comes from a removed
 * run, and is then folded again from the chat's remaining runs, as a rebuild from zero would.
 */
function* dropProjectionRows(
  sql: Statements,
  projections: ReadonlyArray<AnyProjection>,
  removed: ReadonlyArray<Removable>,
  ring: Keyring | null,
): Program<void> {
  const gone = new Set(removed.map((r) => r.runId));
  const refold = new Map<string, Set<AnyProjection>>();
  for (const projection of projections) {
    const keys = new Map<string, Set<string>>();
    for (const { chatId, events } of removed)
      for (const recorded of events) {
        if (!projection.canHandle.includes(recorded.event.type)) continue;
        for (const key of projection.keysOf(recorded))
          keys.set(key, (keys.get(key) ?? new Set()).add(chatId));
      }
    let doomed = [...keys.keys()];
    const drawsOn = projection.drawsOn;
    if (drawsOn) {
      const standing = new Set<string>();
      for (const chunk of chunksOf(doomed, PER_STATEMENT))
        for (const row of yield* all<ProjectionRowSql & { key: string }>(
          MAINTENANCE.projectionRowsOf(chunk.length),
          [projection.name, ...chunk],
        )) {
          const stored = JSON.parse(openStoredProjection(ring, projection.name, row));
          if (!drawsOn(stored).some((runId) => gone.has(runId))) standing.add(row.key);
        }
      doomed = doomed.filter((key) => !standing.has(key));
      for (const key of doomed)
        for (const chatId of keys.get(key)!)
          refold.set(chatId, (refold.get(chatId) ?? new Set()).add(projection));
    }
    for (const chunk of chunksOf(doomed, PER_STATEMENT))
      yield* run(MAINTENANCE.deleteProjectionRows(chunk.length), [projection.name, ...chunk]);
    if (projection.name === SEARCHED_PROJECTION) yield* deleteSearchRows(doomed);
  }
  if (refold.size === 0) return;
  const chatOf = new Map<string, string>();
  for (const chunk of chunksOf([...refold.keys()], PER_STATEMENT))
    for (const { run_id, chat_id } of yield* all<{ run_id: string; chat_id: string }>(
      MAINTENANCE.runsOfChats(chunk.length),
      chunk,
    ))
      chatOf.set(runStreamId(run_id), chat_id);
  const byChat = new Map<string, RecordedEvent[]>();
  for (const chunk of chunksOf([...chatOf.keys()], PER_STATEMENT))
    for (const row of yield* all<EventRow>(MAINTENANCE.streamsRows(chunk.length), chunk)) {
      const recorded = decodeRow(toStored(row), ring);
      const chatId = chatOf.get(recorded.streamId)!;
      const events = byChat.get(chatId);
      if (events) events.push(recorded);
      else byChat.set(chatId, [recorded]);
    }
  for (const [chatId, events] of byChat) {
    events.sort((a, b) => a.position - b.position);
    yield* applyProjections(sql, events, [...refold.get(chatId)!], ring);
  }
}

/**
 * One batch of a prune (DESIGN §9), one transaction that holds the append lock: keep the checked
 * runs whose stream head is still the one checked, record `retention.pruned` with their heads in
 * the `system` stream, then delete their events, guard rows and claims, keep each run's final
 * status and output digest in `pruned_runs`, and update the projection rows their events made.
 * Admissions stay, so a re-sent input finds its run and never starts another (law 6).
 */
export function* pruneBatchProgram(
  sql: Statements,
  projections: ReadonlyArray<AnyProjection>,
  lockAppends: string | null,
  checked: CheckedBatch,
  now: number,
  ring: Keyring | null,
): Program<PruneBatch> {
  if (lockAppends) yield* get(lockAppends, []);
  const heads = new Map<string, string>();
  for (const chunk of chunksOf(checked.removable, PER_STATEMENT))
    for (const head of yield* all<{ stream_id: string; version: number | string; hash: string }>(
      MAINTENANCE.headsOf(chunk.length),
      chunk.map((r) => r.streamId),
    ))
      heads.set(head.stream_id, `${Number(head.version)}:${head.hash}`);
  const skipped = [...checked.skipped];
  const stays = new Set(skipped.map((s) => s.runId));
  const removable: Removable[] = [];
  for (const run of checked.removable) {
    const child = parentStays(run.runId, run.chatId, stays);
    if (child) skipped.push(child);
    else if (heads.get(run.streamId) === `${run.version}:${run.hash}`) removable.push(run);
    else {
      stays.add(run.runId);
      skipped.push({
        runId: run.runId,
        reason: "its stream moved while retention ran; it is left for the next prune",
      });
    }
  }
  const pruned = removable.map(asPruned);
  if (removable.length === 0) return { pruned, skipped, recorded: null };

  const prunedAt = new Date(now).toISOString();
  // Said first, in the same transaction: the triggers let events go only while this row exists.
  yield* run(MAINTENANCE.markRetention, [prunedAt]);
  const sealed: AnyEvent = {
    type: "retention.pruned",
    streams: removable.map(({ streamId, version, hash, position }) => ({
      streamId,
      version,
      hash,
      position,
    })),
  };
  const [appended] = yield* appendAllProgram(
    sql,
    [{ streamId: SYSTEM_STREAM, expectedVersion: "any", events: [sealed] }],
    projections,
    ring,
  );
  for (const chunk of chunksOf(removable, PER_STATEMENT / 5)) {
    const runIds = chunk.map((r) => r.runId);
    yield* run(
      MAINTENANCE.deleteStreams(chunk.length),
      chunk.map((r) => r.streamId),
    );
    yield* run(
      MAINTENANCE.recordPrunedMany(chunk.length),
      chunk.flatMap((r) => [r.runId, r.chatId, r.status, outputDigestOf(r.events), prunedAt]),
    );
    yield* run(MAINTENANCE.deleteGuards(chunk.length), runIds);
    yield* run(MAINTENANCE.deleteClaims(chunk.length), runIds);
  }
  yield* run(MAINTENANCE.unmarkRetention, []);
  yield* dropProjectionRows(sql, projections, removable, ring);
  return { pruned, skipped, recorded: { streamId: SYSTEM_STREAM, version: appended!.nextVersion } };
}

/** What one batch removed, and the runs it left alone. */
export interface PruneBatch {
  readonly pruned: ReadonlyArray<PrunedRun>;
  readonly skipped: ReadonlyArray<{ readonly runId: string; readonly reason: string }>;
  readonly recorded: { readonly streamId: string; readonly version: number } | null;
}

/** Consecutive batches of at most `runs` runs and `PRUNE_BATCH_EVENTS` events (at least one run each). */
const batchesOf = (order: ReadonlyArray<RetentionCandidate>, runs: number): RetentionCandidate[][] => {
  const batches: RetentionCandidate[][] = [];
  let batch: RetentionCandidate[] = [];
  let events = 0;
  for (const candidate of order) {
    if (batch.length > 0 && (batch.length >= runs || events + candidate.version > PRUNE_BATCH_EVENTS)) {
      batches.push(batch);
      batch = [];
      events = 0;
    }
    batch.push(candidate);
    events += candidate.version;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
};

/**
 * Retention in batches of at most `batchRuns` runs and `PRUNE_BATCH_EVENTS` events
 * (docs/decisions/0040). `read` runs a program with no lock: the selection, and each batch's
 * checks; `write` runs a batch in a write transaction of its own (`pruneBatchProgram`), so the
 * append lock is held for one batch at a time and renewals and appends get it in between. A dry
 * run checks every selected run, batch by batch, in one `read`.
 */
export const pruneInBatches = async (
  engine: {
    readonly read: <T>(program: Program<T>) => Promise<T>;
    readonly write: (program: Program<PruneBatch>) => Promise<PruneBatch>;
  },
  sql: Statements,
  projections: ReadonlyArray<AnyProjection>,
  lockAppends: string | null,
  policy: RetentionPolicy & PruneOptions,
  ring: Keyring | null,
): Promise<PruneReport> => {
  const now = policy.now ?? Date.now();
  const batchRuns = policy.batchRuns ?? DEFAULT_PRUNE_BATCH;
  if (!Number.isInteger(batchRuns) || batchRuns < 1)
    throw new RangeError(`batchRuns must be a whole number ≥ 1, got ${batchRuns}`);
  // Listed as the selection lists them (newest first), whatever order the batches took.
  const listed = (
    selection: { prune: ReadonlyArray<RetentionCandidate> },
    runs: ReadonlyArray<PrunedRun>,
  ) => {
    const rank = new Map(selection.prune.map((c, i) => [c.runId, i]));
    return [...runs].sort((a, b) => rank.get(a.runId)! - rank.get(b.runId)!);
  };
  if (policy.dryRun)
    return engine.read(
      (function* () {
        const selection = yield* pruneSelectionProgram({ ...policy, now });
        const pruned: PrunedRun[] = [];
        const skipped: Array<{ runId: string; reason: string }> = [];
        const leftAlone = new Set<string>();
        for (const runs of batchesOf(pruneOrder(selection.prune), batchRuns)) {
          const checked = yield* pruneCheckProgram(runs, leftAlone, ring);
          pruned.push(...checked.removable.map(asPruned));
          skipped.push(...checked.skipped);
          for (const s of checked.skipped) leftAlone.add(s.runId);
        }
        return {
          dryRun: true,
          pruned: listed(selection, pruned),
          kept: selection.kept,
          skipped,
          recorded: null,
          records: [],
        };
      })(),
    );
  const selection = await engine.read(pruneSelectionProgram({ ...policy, now }));
  const order = pruneOrder(selection.prune);
  const pruned: PrunedRun[] = [];
  const skipped: Array<{ runId: string; reason: string }> = [];
  const records: Array<{ streamId: string; version: number }> = [];
  const leftAlone = new Set<string>();
  for (const runs of batchesOf(order, batchRuns)) {
    const checked = await engine.read(pruneCheckProgram(runs, leftAlone, ring));
    const batch = await engine.write(pruneBatchProgram(sql, projections, lockAppends, checked, now, ring));
    pruned.push(...batch.pruned);
    skipped.push(...batch.skipped);
    for (const s of batch.skipped) leftAlone.add(s.runId);
    if (batch.recorded) records.push(batch.recorded);
    policy.onBatch?.({ pruned: pruned.length, selected: selection.prune.length });
  }
  return {
    dryRun: false,
    pruned: listed(selection, pruned),
    kept: selection.kept,
    skipped,
    recorded: records.at(-1) ?? null,
    records,
  };
};

/**
 * Remove one LangGraph thread's stream, one transaction, as retention removes a run: its head goes
 * to the `system` stream in `retention.pruned` first (the sealed record), then its events and the
 * projection rows they made. Only `langgraph-…` streams: their projection rows are their own.
 */
export function* dropStreamProgram(
  sql: Statements,
  projections: ReadonlyArray<AnyProjection>,
  lockAppends: string | null,
  streamId: string,
  ring: Keyring | null,
  now: number,
): Program<DroppedStream | null> {
  if (!streamId.startsWith(GRAPH_STREAM_PREFIX))
    throw new RangeError(
      `only LangGraph thread streams (${GRAPH_STREAM_PREFIX}…) can be dropped, not ${streamId}; finished runs go by retention (holdfast prune)`,
    );
  if (lockAppends) yield* get(lockAppends, []);
  const rows = (yield* all<EventRow>(MAINTENANCE.streamRows, [streamId])).map(toStored);
  const last = rows.at(-1);
  if (!last) return null;
  const owned = new Map<string, Set<string>>();
  for (const row of rows) {
    const recorded = decodeRow(row, ring);
    for (const projection of projections) {
      if (!projection.canHandle.includes(recorded.event.type)) continue;
      const keys = owned.get(projection.name) ?? new Set<string>();
      for (const key of projection.keysOf(recorded)) keys.add(key);
      owned.set(projection.name, keys);
    }
  }
  const head = { streamId, version: last.version, hash: last.hash, position: last.position };
  yield* run(MAINTENANCE.markRetention, [new Date(now).toISOString()]);
  const sealed: AnyEvent = { type: "retention.pruned", streams: [head] };
  const [appended] = yield* appendAllProgram(
    sql,
    [{ streamId: SYSTEM_STREAM, expectedVersion: "any", events: [sealed] }],
    projections,
    ring,
  );
  yield* run(MAINTENANCE.deleteEvents, [streamId]);
  for (const [name, keys] of owned) {
    for (const key of keys) yield* run(MAINTENANCE.deleteProjectionRow, [name, key]);
    if (name === SEARCHED_PROJECTION) yield* deleteSearchRows([...keys]);
  }
  yield* run(MAINTENANCE.unmarkRetention, []);
  return { ...head, recorded: { streamId: SYSTEM_STREAM, version: appended!.nextVersion } };
}
