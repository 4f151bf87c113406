import { randomUUID } from "node:crypto";
import {
  type AnyEvent,
  canonicalJson,
  chainHashOfText,
  EVENT_SCHEMA_VERSION,
  encodePayload,
  GENESIS_HASH,
  type Keyring,
  openProjectionValue,
  type RecordedEvent,
  sealPayload,
  sealProjectionValue,
} from "../../../events/index.js";
import { type AnyProjection, handles, type RunRow } from "../../../projections/index.js";
import {
  ActiveRunExists,
  DuplicateAdmission,
  FencedOut,
  WrongExpectedVersion,
} from "../../../runtime/errors.js";
import type { AppendRequest, AppendResult, Fence } from "../../../runtime/Journal.js";
import { describeExpected, expectedVersionMatches, type GuardWrite, guardWritesFor } from "./guard.js";
import { all, get, type Program, run, UniqueViolation } from "./program.js";
import type { AdmissionRow, ClaimRow, FencedHeadRow, HeadRow } from "./rows.js";
import {
  type RunSearchRow,
  SEARCHED_PROJECTION,
  searchRowOf,
  searchValues,
  withSearchRows,
  writeSearchRows,
} from "./search.js";
import type { Statements } from "./statements.js";

/** Told the projection rows a program wrote (the PostgreSQL owner's memory). */
export type RowsWritten = (rows: ReadonlyArray<ProjectionRowWrite>) => void;

/**
 * One append request inside the batch transaction (the caller wraps it in a savepoint): check the
 * expected version and the fence, write each event chained to the one before, the guard rows it
 * implies, and the inline projections. Any refusal throws a typed error before anything is kept.
 */
export function* appendProgram(
  sql: Statements,
  request: AppendRequest,
  projections: ReadonlyArray<AnyProjection>,
  ring: Keyring | null,
  written?: RowsWritten,
): Program<AppendResult> {
  const { streamId, expectedVersion, events, fence } = request;
  refuseReleaseWithoutFence(request);
  let head: HeadRow | undefined;
  let prefetched: Prefetched | undefined;
  const before = versionBefore(expectedVersion);
  if (fence && sql.fencedReadWithRows && before !== null) {
    // The claim, the head and the projection rows in one read (PostgreSQL: one round trip). The
    // rows' keys depend only on the events and their versions, which the expected version fixes;
    // if the head is elsewhere the append is refused below and the rows are not used.
    const wanted = wantedRows(streamId, before, events, projections);
    if (wanted.length <= PREFETCH_MAX_ROWS) {
      const parts = yield* all<PartRow>(sql.fencedHeadAndRows(wanted.length), [
        fence.runId,
        streamId,
        ...wanted.flatMap((w) => [w.name, w.key]),
      ]);
      const claim = parts.find((p) => p.part === "claim");
      checkFence(
        fence,
        claim && {
          run_id: claim.name!,
          worker_id: claim.key,
          epoch: claim.value!,
          lease_until: claim.position!,
        },
      );
      const top = parts.find((p) => p.part === "head");
      if (top) head = { version: top.value!, hash: top.key! };
      const read = new Map<string, ProjectionRowRead | null>(wanted.map((w) => [w.id, null]));
      for (const p of parts)
        if (p.part === "row")
          read.set(rowId(p.name!, p.key!), {
            name: p.name!,
            key: p.key!,
            value: p.value!,
            position: p.position!,
          });
      prefetched = read;
    }
  }
  if (fence && !prefetched) {
    // The claim and the head in one read. The fence first: a superseded worker must learn that it
    // lost the run, not that it is behind.
    const row = yield* get<FencedHeadRow>(sql.fencedHead, [streamId, streamId, fence.runId]);
    checkFence(fence, row);
    if (row?.head_version != null && row.head_hash != null)
      head = { version: row.head_version, hash: row.head_hash };
  } else if (!fence) {
    head = yield* get<HeadRow>(sql.head, [streamId]);
  }
  const current = head ? Number(head.version) : 0;
  const wrongVersion = () =>
    new WrongExpectedVersion({ streamId, expected: describeExpected(expectedVersion), actual: current });
  if (!expectedVersionMatches(expectedVersion, current)) throw wrongVersion();

  const recorded: RecordedEvent[] = [];
  for (const row of prepareEvents(streamId, head, events, ring)) {
    const { version } = row;
    let inserted: { position: number | string } | undefined;
    try {
      inserted = yield* get(sql.insertEvent, [
        streamId,
        version,
        row.eventId,
        row.event.type,
        row.schemaVersion,
        row.recordedAt,
        row.dataText,
        row.prevHash,
        row.hash,
      ]);
    } catch (error) {
      // Two writers passed the version check together: the unique key decides (STYLE habit 4).
      if (error instanceof UniqueViolation && error.key === "event-version") throw wrongVersion();
      throw error;
    }
    if (!inserted) throw new Error(`the insert of ${streamId}@${version} returned no position`);
    if (ring && recorded.length === 0) yield* run(sql.markSealed, [String(inserted.position)]);
    recorded.push(recordedOf(row, Number(inserted.position)));
    for (const write of guardWritesFor(row.event)) yield* applyGuard(sql, write);
  }
  const rows = yield* applyProjections(sql, recorded, projections, ring, prefetched);
  written?.(rows);
  // Checked before: a fenced append only gets here holding the claim it lets go.
  if (request.releaseClaim && fence) yield* run(sql.releaseRun, [fence.workerId, fence.runId]);
  return { streamId, nextVersion: recorded.at(-1)?.version ?? current, recorded };
}

/** An event ready to insert: everything but the position, which the database hands out. */
export interface PreparedEvent {
  readonly streamId: string;
  readonly version: number;
  readonly eventId: string;
  readonly recordedAt: string;
  readonly schemaVersion: number;
  /** The stored payload: canonical JSON, sealed with a key. */
  readonly dataText: string;
  readonly prevHash: string;
  readonly hash: string;
  readonly event: AnyEvent;
}

/** The rows of `events` appended after `head`, each chained to the one before (DESIGN §9). */
export const prepareEvents = (
  streamId: string,
  head: HeadRow | undefined,
  events: ReadonlyArray<AnyEvent>,
  ring: Keyring | null,
): PreparedEvent[] => {
  let prevHash = head?.hash ?? GENESIS_HASH;
  let version = head ? Number(head.version) : 0;
  const rows: PreparedEvent[] = [];
  for (const event of events) {
    version += 1;
    // With a key, the payload fields are sealed; the chain covers what is stored (DESIGN §9).
    const data = ring ? sealPayload(ring, encodePayload(event), { streamId, version }) : encodePayload(event);
    const eventId = randomUUID();
    const recordedAt = new Date().toISOString();
    const schemaVersion = EVENT_SCHEMA_VERSION;
    const dataText = canonicalJson(data);
    const hash = chainHashOfText(
      { streamId, version, eventId, recordedAt, prevHash, schemaVersion },
      dataText,
    );
    rows.push({ streamId, version, eventId, recordedAt, schemaVersion, dataText, prevHash, hash, event });
    prevHash = hash;
  }
  return rows;
};

/**
 * Events to insert as one list per column, in the order of `insertEvents` and `append_owned`:
 * stream, version, event id, type, schema version, recorded at, data, previous hash, hash.
 */
export const eventColumns = (rows: ReadonlyArray<PreparedEvent>): unknown[][] => [
  rows.map((r) => r.streamId),
  rows.map((r) => r.version),
  rows.map((r) => r.eventId),
  rows.map((r) => r.event.type),
  rows.map((r) => r.schemaVersion),
  rows.map((r) => r.recordedAt),
  rows.map((r) => r.dataText),
  rows.map((r) => r.prevHash),
  rows.map((r) => r.hash),
];

/** The recorded event of a row the database placed at `position`. */
export const recordedOf = (row: PreparedEvent, position: number): RecordedEvent => ({
  streamId: row.streamId,
  version: row.version,
  position,
  eventId: row.eventId,
  recordedAt: row.recordedAt,
  prevHash: row.prevHash,
  hash: row.hash,
  schemaVersion: row.schemaVersion,
  event: row.event,
});

/** Only a fenced append holds a claim to let go. */
export const refuseReleaseWithoutFence = (request: AppendRequest): void => {
  if (request.releaseClaim && !request.fence)
    throw new TypeError(
      `an append to ${request.streamId} asks to release its claim but has no fence: only a fenced append holds a claim to let go`,
    );
};

/** A stored projection row as the append reads it. */
export interface ProjectionRowRead {
  readonly name: string;
  readonly key: string;
  readonly value: string;
  readonly position: number | string;
}

/** Projection rows read ahead with the claim, by {@link rowId}: null where no row is stored. */
export type Prefetched = ReadonlyMap<string, ProjectionRowRead | null>;

/** One row of `fencedHeadAndRows`. */
export interface PartRow {
  readonly part: "claim" | "head" | "row";
  readonly name: string | null;
  readonly key: string | null;
  readonly value: string | null;
  readonly position: number | string | null;
}

/** More rows than this are read as before, in their own statements. */
const PREFETCH_MAX_ROWS = 64;

export const rowId = (name: string, key: string): string => `${name}\u0000${key}`;

/** The stream's version before the append when the expected version fixes it, else null. */
export const versionBefore = (expected: AppendRequest["expectedVersion"]): number | null =>
  typeof expected === "number" ? expected : expected === "no-stream" ? 0 : null;

/**
 * The projection rows the events will touch if they land at versions `before + 1…`: keys depend on
 * the events and their place in the stream, never on positions or on the rows.
 */
export const wantedRows = (
  streamId: string,
  before: number,
  events: ReadonlyArray<AnyEvent>,
  projections: ReadonlyArray<AnyProjection>,
): Array<{ readonly name: string; readonly key: string; readonly id: string }> => {
  const entries = events.map(
    (event, i): RecordedEvent => ({
      streamId,
      version: before + i + 1,
      position: 0,
      eventId: "",
      recordedAt: "",
      prevHash: "",
      hash: "",
      schemaVersion: EVENT_SCHEMA_VERSION,
      event,
    }),
  );
  const wanted = new Map<string, { readonly name: string; readonly key: string; readonly id: string }>();
  for (const { projection, key, id } of touches(entries, projections))
    if (!wanted.has(id)) wanted.set(id, { name: projection.name, key, id });
  return [...wanted.values()];
};

/** Each (event, projection, key) the events touch, in order: the same for the read-ahead and the write. */
function* touches(
  entries: ReadonlyArray<RecordedEvent>,
  projections: ReadonlyArray<AnyProjection>,
): Generator<{
  readonly projection: AnyProjection;
  readonly entry: RecordedEvent;
  readonly key: string;
  readonly id: string;
}> {
  for (const entry of entries)
    for (const projection of projections) {
      if (!handles(projection, entry)) continue;
      for (const key of projection.keysOf(entry))
        yield { projection, entry, key, id: rowId(projection.name, key) };
    }
}

/** Refuse an append whose fence is not the run's current claim (law 10); a released claim is none. */
export const checkFence = (fence: Fence, row: ClaimRow | undefined): void => {
  const claim = row?.worker_id ? row : undefined;
  if (claim && claim.worker_id === fence.workerId && Number(claim.epoch) === fence.epoch) return;
  throw new FencedOut({
    runId: fence.runId,
    workerId: fence.workerId,
    epoch: fence.epoch,
    currentWorkerId: claim?.worker_id ?? null,
    currentEpoch: claim ? Number(claim.epoch) : null,
  });
};

function* applyGuard(sql: Statements, write: GuardWrite): Program<void> {
  if (write.kind === "finish") {
    yield* run(sql.finish, [write.runId]);
    return;
  }
  if (write.kind === "queue") {
    yield* run(sql.queueOne, [write.chatId]);
    return;
  }
  if (write.kind === "wait") {
    yield* run(sql.waitDue, [write.runId, write.dueAtMs, write.wait, write.callId]);
    return;
  }
  if (write.kind === "unwait") {
    yield* run(sql.unwait, [write.runId]);
    return;
  }
  if (write.kind === "schedule-due") {
    yield* run(sql.scheduleDue, [write.scheduleId, write.dueAtMs]);
    return;
  }
  if (write.kind === "schedule-off") {
    yield* run(sql.scheduleOff, [write.scheduleId]);
    return;
  }
  if (write.kind === "dequeue") {
    yield* run(sql.dequeueEmptied, [write.chatId]);
    yield* run(sql.dequeueOne, [write.chatId]);
    return;
  }
  const { chatId, inputId } = write;
  // Pre-reads only give the nicer error; the unique keys are what enforce (law 6).
  if (yield* get<AdmissionRow>(sql.admission, [chatId, inputId]))
    throw new DuplicateAdmission({ chatId, inputId });
  const active = yield* get<{ run_id: string }>(sql.activeRun, [chatId]);
  if (active) throw new ActiveRunExists({ chatId, runId: active.run_id });
  try {
    yield* run(sql.insertAdmission, [chatId, inputId, write.digest, write.runId]);
    yield* run(sql.activate, [write.runId, chatId]);
  } catch (error) {
    if (error instanceof UniqueViolation && error.key === "admission")
      throw new DuplicateAdmission({ chatId, inputId });
    if (error instanceof UniqueViolation && error.key === "active-run")
      throw new ActiveRunExists({ chatId, runId: "(admitted concurrently)" });
    throw error;
  }
}

/**
 * Evolve every inline projection the events touch, reading each row once and writing its final
 * state once, with the position of the last event that changed it. With a key, rows are stored
 * sealed. On PostgreSQL the rows are read in one statement and written in one (per 16 rows: each
 * statement is a round trip); on libSQL one statement per row is cheaper (see the dialect).
 */
export function* applyProjections(
  sql: Statements,
  recorded: ReadonlyArray<RecordedEvent>,
  projections: ReadonlyArray<AnyProjection>,
  ring: Keyring | null,
  prefetched?: Prefetched,
): Program<ProjectionRowWrite[]> {
  const rows = yield* foldProjectionRows(sql, recorded, projections, ring, prefetched);
  const per = sql.projectionRowsPerStatement;
  // The run index follows the runs rows in the same commit (decision 0073). Where each statement
  // is a round trip (PostgreSQL), the index rows ride in the last projection statement.
  let search = searchRowsOf(rows);
  for (let from = 0; from < rows.length; from += per) {
    const chunk = rows.slice(from, from + per);
    const values = chunk.flatMap(({ name, key, value, position }) => [name, key, value, position]);
    if (per > 1 && from + per >= rows.length && search.length > 0 && search.length <= per) {
      yield* run(withSearchRows(sql.upsertProjectionsOf(chunk.length), search.length), [
        ...values,
        ...search.flatMap(searchValues),
      ]);
      search = [];
    } else yield* run(per === 1 ? sql.upsertProjection : sql.upsertProjectionsOf(chunk.length), values);
  }
  yield* writeSearchRows(search, per);
  return rows;
}

/** A projection row's new state, ready to store (sealed with a key). */
export interface ProjectionRowWrite {
  readonly name: string;
  readonly key: string;
  readonly value: string;
  readonly position: number;
  /** For a runs row: its row of the run index, written with it (decision 0073). */
  readonly search?: RunSearchRow;
}

/** The run index rows of these projection rows (those of runs rows). */
export const searchRowsOf = (rows: ReadonlyArray<ProjectionRowWrite>): RunSearchRow[] =>
  rows.flatMap((r) => (r.search ? [r.search] : []));

/**
 * The final state of every inline projection row the events touch: each row read once (those read
 * ahead are not read again), every event folded in order, the position of the last event that
 * changed it.
 */
export function* foldProjectionRows(
  sql: Statements,
  recorded: ReadonlyArray<RecordedEvent>,
  projections: ReadonlyArray<AnyProjection>,
  ring: Keyring | null,
  prefetched?: Prefetched,
): Program<ProjectionRowWrite[]> {
  // The keys first: which rows a projection touches depends on the events, never on the rows.
  const touched = [...touches(recorded, projections)];
  const states = new Map<string, { name: string; key: string; state: unknown; position: number }>();
  for (const { projection, key, id } of touched)
    if (!states.has(id)) states.set(id, { name: projection.name, key, state: undefined, position: 0 });
  if (states.size === 0) return [];
  const rows = [...states.values()];
  const found: ProjectionRowRead[] = [];
  // Rows read ahead are not read again; any other (none, when the keys were foreseen) is read here.
  const toRead = prefetched ? rows.filter((r) => !prefetched.has(rowId(r.name, r.key))) : rows;
  if (prefetched)
    for (const r of rows) {
      const row = prefetched.get(rowId(r.name, r.key));
      if (row) found.push(row);
    }
  const per = sql.projectionRowsPerStatement;
  for (let from = 0; from < toRead.length; from += per) {
    const chunk = toRead.slice(from, from + per);
    found.push(
      ...(per === 1
        ? yield* oneRow(sql, chunk[0]!)
        : yield* all<ProjectionRowRead>(
            sql.projectionsOf(chunk.length),
            chunk.flatMap((r) => [r.name, r.key]),
          )),
    );
  }
  for (const row of found) {
    const known = states.get(rowId(row.name, row.key));
    if (!known) continue;
    known.state = JSON.parse(
      openProjectionValue(ring, { name: row.name, key: row.key, position: Number(row.position) }, row.value),
    );
  }
  for (const { projection, entry, key, id } of touched) {
    const known = states.get(id)!;
    known.state = projection.evolve(known.state, entry, key);
    known.position = entry.position;
  }
  return rows.map(({ name, key, state, position }) => ({
    name,
    key,
    value: sealProjectionValue(ring, { name, key, position }, JSON.stringify(state)),
    position,
    ...(name === SEARCHED_PROJECTION && state ? { search: searchRowOf(state as RunRow, ring) } : {}),
  }));
}

function* oneRow(
  sql: Statements,
  { name, key }: { readonly name: string; readonly key: string },
): Program<Array<{ name: string; key: string; value: string; position: number | string }>> {
  const row = yield* get<{ value: string; position: number | string }>(sql.projection, [name, key]);
  return row ? [{ name, key, ...row }] : [];
}

/** Several requests, all or none (their savepoint is the caller's): a document change and its call's outcome. */
export function* appendAllProgram(
  sql: Statements,
  requests: ReadonlyArray<AppendRequest>,
  projections: ReadonlyArray<AnyProjection>,
  ring: Keyring | null,
  written?: RowsWritten,
): Program<AppendResult[]> {
  const results: AppendResult[] = [];
  for (const request of requests)
    results.push(yield* appendProgram(sql, request, projections, ring, written));
  return results;
}
