import type { Keyring, RecordedEvent } from "../../../events/index.js";
import type { AnyProjection } from "../../../projections/index.js";
import { WrongExpectedVersion } from "../../../runtime/errors.js";
import type { AppendRequest, AppendResult } from "../../../runtime/Journal.js";
import {
  checkFence,
  eventColumns,
  foldProjectionRows,
  type PartRow,
  type PreparedEvent,
  type ProjectionRowRead,
  type ProjectionRowWrite,
  prepareEvents,
  recordedOf,
  refuseReleaseWithoutFence,
  rowId,
  searchRowsOf,
  versionBefore,
  wantedRows,
} from "./append.js";
import { describeExpected, expectedVersionMatches, guardWritesFor } from "./guard.js";
import { all, type Program, run } from "./program.js";
import type { ClaimRow, HeadRow } from "./rows.js";
import { searchColumns } from "./search.js";
import type { ListStatements, Statements } from "./statements.js";

/** What became of one caller's requests (all of them, or none). */
export type GroupOutcome = { readonly ok: AppendResult[] } | { readonly error: unknown };

/**
 * Whether a caller's requests can be decided in memory from the claims, heads and rows read for
 * the whole batch. An admission cannot: it is decided by unique keys (law 6), so it goes through
 * {@link appendAllProgram} as before.
 */
export const decidableInMemory = (requests: ReadonlyArray<AppendRequest>): boolean =>
  requests.every((r) => r.events.every((e) => guardWritesFor(e).every((w) => w.kind === "finish")));

/**
 * The callers of a batch that {@link batchProgram} can decide in memory, and the others
 * (admissions), each in the batch's order. A caller that shares a stream with one of the others
 * goes with them, and so on through every stream they touch, so each stream's appends keep their
 * callers' order.
 */
export const splitBatch = <P extends { readonly requests: ReadonlyArray<AppendRequest> }>(
  batch: ReadonlyArray<P>,
): { readonly decided: P[]; readonly others: P[] } => {
  const others = new Set(batch.filter((p) => !decidableInMemory(p.requests)));
  const theirs = new Set([...others].flatMap((p) => p.requests.map((r) => r.streamId)));
  for (let grew = true; grew; ) {
    grew = false;
    for (const pending of batch)
      if (!others.has(pending) && pending.requests.some((r) => theirs.has(r.streamId))) {
        others.add(pending);
        for (const r of pending.requests) theirs.add(r.streamId);
        grew = true;
      }
  }
  return { decided: batch.filter((p) => !others.has(p)), others: batch.filter((p) => others.has(p)) };
};

/**
 * A whole batch of appends in a few statements whatever its size, for an engine where each
 * statement is a round trip (PostgreSQL): one read of every claim, head and projection row the
 * batch needs; every refusal (a lost fence, a wrong expected version) decided in memory, so a
 * refused caller wrote nothing and needs no savepoint; one insert of every accepted event; one
 * write of every projection row, finished run and released claim. Callers go in their order, each
 * seeing the ones before it (the same stream twice, a claim let go). The caller holds the
 * journal's write lock, so nothing else appends between the read and the writes; any statement
 * that fails fails the batch, which the caller then runs request by request.
 */
export function* batchProgram(
  sql: Statements,
  lists: ListStatements,
  groups: ReadonlyArray<ReadonlyArray<AppendRequest>>,
  projections: ReadonlyArray<AnyProjection>,
  ring: Keyring | null,
  written?: (rows: ReadonlyArray<ProjectionRowWrite>) => void,
): Program<GroupOutcome[]> {
  // 1. One read: the fences' claims, the streams' heads and the rows the events will touch where
  // their versions are known before the read (rows of other appends are read after deciding).
  const runIds = new Set<string>();
  const streamIds = new Set<string>();
  const wanted = new Map<string, { readonly name: string; readonly key: string }>();
  for (const group of groups)
    for (const request of group) {
      if (request.fence) runIds.add(request.fence.runId);
      streamIds.add(request.streamId);
      const before = versionBefore(request.expectedVersion);
      if (before !== null)
        for (const w of wantedRows(request.streamId, before, request.events, projections))
          wanted.set(w.id, w);
    }
  const parts = yield* all<PartRow>(lists.read, [
    [...runIds],
    [...streamIds],
    [...wanted.values()].map((w) => w.name),
    [...wanted.values()].map((w) => w.key),
  ]);
  const claims = new Map<string, ClaimRow>();
  const heads = new Map<string, HeadRow | undefined>();
  const prefetched = new Map<string, ProjectionRowRead | null>([...wanted.keys()].map((id) => [id, null]));
  for (const p of parts) {
    if (p.part === "claim")
      claims.set(p.name!, { run_id: p.name!, worker_id: p.key, epoch: p.value!, lease_until: p.position! });
    else if (p.part === "head") heads.set(p.name!, { version: p.value!, hash: p.key! });
    else
      prefetched.set(rowId(p.name!, p.key!), {
        name: p.name!,
        key: p.key!,
        value: p.value!,
        position: p.position!,
      });
  }

  // 2. Decide each caller in order, against the state the callers before it left.
  const released = new Set<string>();
  const outcomes: Array<GroupOutcome | undefined> = [];
  const accepted: Array<{
    readonly index: number;
    readonly planned: ReadonlyArray<Planned>;
  }> = [];
  for (const [index, group] of groups.entries()) {
    const localHeads = new Map<string, HeadRow | undefined>();
    const localReleased = new Set<string>();
    const planned: Planned[] = [];
    try {
      for (const request of group) {
        refuseReleaseWithoutFence(request);
        const { streamId, expectedVersion, fence } = request;
        if (fence) {
          const gone = released.has(fence.runId) || localReleased.has(fence.runId);
          checkFence(fence, gone ? undefined : claims.get(fence.runId));
        }
        const head = localHeads.has(streamId) ? localHeads.get(streamId) : heads.get(streamId);
        const current = head ? Number(head.version) : 0;
        if (!expectedVersionMatches(expectedVersion, current))
          throw new WrongExpectedVersion({
            streamId,
            expected: describeExpected(expectedVersion),
            actual: current,
          });
        const rows = prepareEvents(streamId, head, request.events, ring);
        const last = rows.at(-1);
        if (last) localHeads.set(streamId, { version: last.version, hash: last.hash });
        if (request.releaseClaim && fence) localReleased.add(fence.runId);
        planned.push({ request, rows, current });
      }
    } catch (error) {
      outcomes[index] = { error };
      continue;
    }
    for (const [streamId, head] of localHeads) heads.set(streamId, head);
    for (const runId of localReleased) released.add(runId);
    accepted.push({ index, planned });
  }
  if (accepted.length === 0) return outcomes as GroupOutcome[];

  // 3. One insert of every accepted event, in the callers' order.
  const rows = accepted.flatMap((a) => a.planned.flatMap((p) => p.rows));
  const positions = new Map<string, number>();
  if (rows.length > 0) {
    const inserted = yield* all<{ stream_id: string; version: number | string; position: number | string }>(
      lists.insertEvents,
      eventColumns(rows),
    );
    for (const row of inserted)
      positions.set(rowId(row.stream_id, String(row.version)), Number(row.position));
  }
  const placed = (row: PreparedEvent): number => {
    const position = positions.get(rowId(row.streamId, String(row.version)));
    if (position === undefined)
      throw new Error(`the insert of ${row.streamId}@${row.version} returned no position`);
    return position;
  };
  // A stream's events must follow its versions in the global order too; the insert hands positions
  // out in the rows' order, and this checks it rather than trusting it.
  const lastOf = new Map<string, number>();
  for (const row of rows) {
    const position = placed(row);
    if ((lastOf.get(row.streamId) ?? -1) >= position)
      throw new Error(
        `the insert placed ${row.streamId}@${row.version} at ${position}, before its previous event`,
      );
    lastOf.set(row.streamId, position);
  }

  // 4. One write of the projection rows, the finished runs, the released claims and the first
  // sealed position.
  const recorded: RecordedEvent[] = [];
  for (const { index, planned } of accepted) {
    const results: AppendResult[] = planned.map(({ request, rows, current }) => {
      const events = rows.map((row) => recordedOf(row, placed(row)));
      recorded.push(...events);
      return { streamId: request.streamId, nextVersion: events.at(-1)?.version ?? current, recorded: events };
    });
    outcomes[index] = { ok: results };
  }
  const writes = yield* foldProjectionRows(sql, recorded, projections, ring, prefetched);
  written?.(writes);
  const finished = new Set<string>();
  for (const entry of recorded)
    for (const write of guardWritesFor(entry.event)) if (write.kind === "finish") finished.add(write.runId);
  const releases = accepted.flatMap((a) =>
    a.planned.flatMap(({ request }) => (request.releaseClaim && request.fence ? [request.fence] : [])),
  );
  let first: number | null = null;
  for (const event of recorded) if (first === null || event.position < first) first = event.position;
  const sealedSince = ring && first !== null ? String(first) : null;
  if (writes.length > 0 || finished.size > 0 || releases.length > 0 || sealedSince !== null)
    yield* run(lists.write, [
      writes.map((w) => w.name),
      writes.map((w) => w.key),
      writes.map((w) => w.value),
      writes.map((w) => w.position),
      [...finished],
      releases.map((f) => f.runId),
      releases.map((f) => f.workerId),
      releases.map((f) => f.runId),
      sealedSince,
      ...searchColumns(searchRowsOf(writes)),
    ]);
  return outcomes as GroupOutcome[];
}

/** An accepted request: its events ready to insert, and the stream's version it was checked against. */
interface Planned {
  readonly request: AppendRequest;
  readonly rows: PreparedEvent[];
  readonly current: number;
}
