import { createHash } from "node:crypto";
import {
  type AnyEvent,
  canonicalJson,
  decodeRow,
  GRAPH_STREAM_PREFIX,
  type Keyring,
  openProjectionValue,
  runStreamId,
  SealError,
  type StoredRow,
  SYSTEM_STREAM,
} from "../../events/index.js";
import type { AnyProjection } from "../../projections/index.js";
import type {
  DroppedStream,
  ProjectionRebuild,
  PrunedRun,
  PruneReport,
  RetentionPolicy,
  StoredProjectionRow,
} from "../../runtime/Journal.js";
import { checkPrunable, type RetentionCandidate, selectForPruning } from "../../runtime/retention.js";
import { appendAllProgram, applyProjections } from "./append.js";
import { all, get, type Program, run } from "./program.js";
import { RunFoldCheck } from "./RunFoldCheck.js";
import { type EventRow, toStored } from "./rows.js";
import type { Statements } from "./statements.js";

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
  // No deleteAdmission: an admission outlives its run (law 6), or the same input would run again.
  recordPruned:
    "INSERT INTO pruned_runs (run_id, chat_id, status, output_digest, pruned_at) VALUES (?, ?, ?, ?, ?)",
  deleteGuard: "DELETE FROM run_guard WHERE run_id = ?",
  deleteClaim: "DELETE FROM claims WHERE run_id = ?",
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

/** `run.completed`'s output digest, read from the end of a run's stored rows; null when it did not complete. */
const outputDigestOf = (rows: ReadonlyArray<StoredRow>, ring: Keyring | null): string | null => {
  for (let i = rows.length - 1; i >= 0; i--) {
    const { event } = decodeRow(rows[i]!, ring);
    if (event.type === "run.completed") return event.outputDigest;
    if (event.type === "run.failed" || event.type === "run.stopped") return null;
  }
  return null;
};

/**
 * Retention (DESIGN §9), one transaction: choose the finished runs the policy does not keep, check
 * each against its own events, record `retention.pruned` with their heads in the `system` stream,
 * then delete their events, guard row and claim, keep each run's final status and output digest in
 * `pruned_runs`, and rebuild the projections from what remains. Admissions stay, so a re-sent input
 * finds its run and never starts another (law 6). A dry run stops after the checks and writes nothing.
 */
export function* pruneProgram(
  sql: Statements,
  projections: ReadonlyArray<AnyProjection>,
  lockAppends: string | null,
  policy: RetentionPolicy & { readonly dryRun: boolean; readonly now: number },
  ring: Keyring | null,
): Program<PruneReport> {
  if (lockAppends && !policy.dryRun) yield* get(lockAppends, []);
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
  const selection = selectForPruning(candidates, policy, policy.now);
  const pruned: PrunedRun[] = [];
  const outputDigests = new Map<string, string | null>();
  const skipped: Array<{ runId: string; reason: string }> = [];
  for (const candidate of selection.prune) {
    const streamId = runStreamId(candidate.runId);
    const rows = (yield* all<EventRow>(MAINTENANCE.streamRows, [streamId])).map(toStored);
    const checked = checkPrunable(rows, candidate, ring);
    if ("problem" in checked) {
      skipped.push({ runId: candidate.runId, reason: checked.problem });
      continue;
    }
    // The rows decoded in checkPrunable, so they decode here too.
    outputDigests.set(candidate.runId, outputDigestOf(rows, ring));
    pruned.push({
      runId: candidate.runId,
      chatId: candidate.chatId,
      status: checked.status,
      streamId,
      version: candidate.version,
      hash: candidate.hash,
      position: candidate.position,
      finishedAt: candidate.recordedAt,
    });
  }
  const report = { dryRun: policy.dryRun, pruned, kept: selection.kept, skipped };
  if (policy.dryRun || pruned.length === 0) return { ...report, recorded: null };

  const prunedAt = new Date(policy.now).toISOString();
  // Said first, in the same transaction: the triggers let events go only while this row exists.
  yield* run(MAINTENANCE.markRetention, [prunedAt]);
  const sealed: AnyEvent = {
    type: "retention.pruned",
    streams: pruned.map(({ streamId, version, hash, position }) => ({ streamId, version, hash, position })),
  };
  const [appended] = yield* appendAllProgram(
    sql,
    [{ streamId: SYSTEM_STREAM, expectedVersion: "any", events: [sealed] }],
    projections,
    ring,
  );
  for (const { runId, chatId, status, streamId } of pruned) {
    yield* run(MAINTENANCE.deleteEvents, [streamId]);
    yield* run(MAINTENANCE.recordPruned, [runId, chatId, status, outputDigests.get(runId) ?? null, prunedAt]);
    yield* run(MAINTENANCE.deleteGuard, [runId]);
    yield* run(MAINTENANCE.deleteClaim, [runId]);
  }
  yield* run(MAINTENANCE.unmarkRetention, []);
  // A chat's row carries the checkpoint of its latest run, which may be one just removed.
  yield* rebuildBody(sql, projections, ring);
  return { ...report, recorded: { streamId: SYSTEM_STREAM, version: appended!.nextVersion } };
}

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
  for (const [name, keys] of owned)
    for (const key of keys) yield* run(MAINTENANCE.deleteProjectionRow, [name, key]);
  yield* run(MAINTENANCE.unmarkRetention, []);
  return { ...head, recorded: { streamId: SYSTEM_STREAM, version: appended!.nextVersion } };
}
