/**
 * A run owner's append in one round trip (decision 0034). A runtime's sequential call is two fenced
 * appends to its own run stream, and on PostgreSQL each append through the transaction path is five
 * round trips (BEGIN with the lock, the read, the insert, the upsert, COMMIT). The owner already
 * knows what the read would return: the stream's head and the projection rows it wrote last. So it
 * prepares everything in memory — the events chained to the head it knows, the rows folded from the
 * values it knows with a stand-in for each event's position — and calls `append_owned` (migration
 * 5) in one autocommitted statement, which takes the append lock, checks every assumption (the
 * claim, the head's version and hash, each row's value and position) and writes nothing, returning
 * NULL, if one has moved; the journal then takes the transaction path, which reads them afresh.
 *
 * What it knows comes only from its own committed appends, and nothing it knows is trusted: a stale
 * entry costs one refused statement, never a wrong write.
 */
import type pg from "pg";
import type { RecordedEvent } from "../../../events/index.js";
import type { AnyProjection } from "../../../projections/index.js";
import { JournalUnavailable } from "../../../runtime/errors.js";
import type { AppendRequest, AppendResult } from "../../../runtime/Journal.js";
import {
  eventColumns,
  foldProjectionRows,
  type Prefetched,
  type PreparedEvent,
  type ProjectionRowRead,
  type ProjectionRowWrite,
  prepareEvents,
  recordedOf,
  rowId,
  wantedRows,
} from "../sql/append.js";
import { guardWritesFor } from "../sql/guard.js";
import { runSync } from "../sql/program.js";
import type { Statements } from "../sql/statements.js";
import { checkout, describe, ended, giveBack, prepared, refusedBeforeCommit } from "./pooled.js";

/** How many streams and rows the owner remembers; the oldest go first. */
const REMEMBERED = 4096;

/**
 * The stand-in position of the `n`-th event (from 1) while rows are folded before the insert hands
 * out positions: 16 digits, far above any position, printed by JSON as digits.
 */
const STAND_IN = 9_000_000_000_000_000;
/**
 * A second set, to check that a row's value depends on positions only where they are printed: other
 * digits, spacing and parity than the stand-ins', so no value derived from a position (its parity,
 * a remainder, a difference of two) stays the same under the swap.
 */
const CHECK = 8_000_000_000_000_000;
const standIn = (n: number): number => STAND_IN + n;
const checkIn = (n: number): number => CHECK + 7 * n + 3;
/** The event (from 1) whose stand-in a folded row's position is. */
const eventOf = (position: number): number => position - STAND_IN;

interface KnownHead {
  readonly runId: string;
  readonly workerId: string;
  readonly epoch: number;
  readonly version: number;
  readonly hash: string;
}

/** One request of a plan: its events, and its rows folded with stand-ins. */
interface PlannedRequest {
  readonly request: AppendRequest;
  readonly head: KnownHead;
  readonly prepared: ReadonlyArray<PreparedEvent>;
  /** Its first event's index among the plan's events, from 1. */
  readonly first: number;
  /** Each row's new value with stand-ins, and the event (index from 1) whose position it takes. */
  readonly rows: ReadonlyArray<{ readonly write: ProjectionRowWrite; readonly event: number }>;
  readonly known: ReadonlyArray<ProjectionRowRead>;
}

/** Requests ready for `append_owned`, all or none. */
export interface OwnedPlan {
  readonly requests: ReadonlyArray<PlannedRequest>;
}

/** A map that forgets its oldest entries beyond {@link REMEMBERED}. */
class Bounded<V> {
  private readonly entries = new Map<string, V>();
  get(key: string): V | undefined {
    return this.entries.get(key);
  }
  set(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > REMEMBERED) this.entries.delete(this.entries.keys().next().value!);
  }
  delete(key: string): void {
    this.entries.delete(key);
  }
}

/** The heads and rows a journal's own appends committed, and the plans made from them. */
export class OwnedAppends {
  private readonly heads = new Bounded<KnownHead>();
  private readonly rows = new Bounded<ProjectionRowRead>();

  constructor(
    private readonly sql: Statements,
    private readonly projections: ReadonlyArray<AnyProjection>,
  ) {}

  /**
   * The plan for a batch of requests if all of them can go in one statement, else null. Each must
   * be fenced, release nothing, admit or finish no run (those are unique keys' and the run guard's),
   * be at the head this journal committed last for the same claim, and touch only rows it knows;
   * no two may share a run, a stream or a row (each is then decided alone).
   */
  plan(requests: ReadonlyArray<AppendRequest>): OwnedPlan | null {
    const runs = new Set<string>();
    const streams = new Set<string>();
    const rowIds = new Set<string>();
    const planned: PlannedRequest[] = [];
    let events = 0;
    for (const request of requests) {
      const one = this.planOne(request, events + 1, runs, streams, rowIds);
      if (!one) return null;
      planned.push(one);
      events += one.prepared.length;
    }
    return planned.length > 0 ? { requests: planned } : null;
  }

  private planOne(
    request: AppendRequest,
    first: number,
    runs: Set<string>,
    streams: Set<string>,
    rowIds: Set<string>,
  ): PlannedRequest | null {
    const { fence, streamId, expectedVersion, events } = request;
    if (!fence || request.releaseClaim || typeof expectedVersion !== "number" || events.length === 0)
      return null;
    if (runs.has(fence.runId) || streams.has(streamId)) return null;
    runs.add(fence.runId);
    streams.add(streamId);
    const head = this.heads.get(streamId);
    if (
      !head ||
      head.version !== expectedVersion ||
      head.runId !== fence.runId ||
      head.workerId !== fence.workerId ||
      head.epoch !== fence.epoch
    )
      return null;
    if (events.some((event) => guardWritesFor(event).length > 0)) return null;
    const known = new Map<string, ProjectionRowRead>();
    for (const wanted of wantedRows(streamId, head.version, events, this.projections)) {
      const row = this.rows.get(wanted.id);
      if (!row || rowIds.has(wanted.id)) return null;
      rowIds.add(wanted.id);
      known.set(wanted.id, row);
    }
    const prepared = prepareEvents(streamId, head, events, null);
    const folded = this.fold(prepared, first, standIn, known);
    const check = this.fold(prepared, first, checkIn, known);
    if (folded.length !== known.size) return null;
    const rows: Array<{ write: ProjectionRowWrite; event: number }> = [];
    // The function checks known[i] and writes rows[i] under the same name and key: one order.
    const checked: ProjectionRowRead[] = [];
    for (const [i, write] of folded.entries()) {
      const was = known.get(rowId(write.name, write.key));
      if (!was) return null;
      if (!positionsOnlyWherePrinted(write.value, check[i]!.value, first, prepared.length)) return null;
      rows.push({ write, event: eventOf(write.position) });
      checked.push(was);
    }
    return { request, head, prepared, first, rows, known: checked };
  }

  /** The parameters of `append_owned` for a plan. */
  parameters(plan: OwnedPlan): unknown[] {
    const requests = plan.requests;
    const events = requests.flatMap((r) => r.prepared);
    const known = requests.flatMap((r) => r.known);
    const rows = requests.flatMap((r) =>
      r.rows.map((row) => ({ ...row, first: r.first, last: r.first + r.prepared.length - 1 })),
    );
    return [
      requests.map((r) => r.request.fence!.runId),
      requests.map((r) => r.request.fence!.workerId),
      requests.map((r) => r.request.fence!.epoch),
      requests.map((r) => r.request.streamId),
      requests.map((r) => r.head.version),
      requests.map((r) => r.head.hash),
      ...eventColumns(events),
      known.map((r) => r.name),
      known.map((r) => r.key),
      known.map((r) => r.value),
      known.map((r) => String(r.position)),
      rows.map((r) => r.write.value),
      rows.map((r) => r.event),
      rows.map((r) => r.first),
      rows.map((r) => r.last),
      events.map((_, i) => String(standIn(i + 1))),
    ];
  }

  /**
   * The plan committed with these positions (one per event, in the plan's order): each request's
   * result, and what the owner now knows. Each stream's positions must follow its versions; this
   * checks it rather than trusting the insert.
   */
  committed(plan: OwnedPlan, positions: ReadonlyArray<number>): AppendResult[] {
    if (positions.length !== plan.requests.reduce((n, r) => n + r.prepared.length, 0))
      throw new Error(`append_owned returned ${positions.length} positions for the plan's events`);
    return plan.requests.map(({ request, prepared, first, rows }) => {
      const recorded = prepared.map((row, i) => recordedOf(row, positions[first - 1 + i]!));
      for (let i = 1; i < recorded.length; i++)
        if (recorded[i]!.position <= recorded[i - 1]!.position)
          throw new Error(
            `append_owned placed ${request.streamId}@${recorded[i]!.version} before its previous event`,
          );
      this.learnHead(request, recorded);
      this.learnRows(
        rows.map(({ write }) => ({
          ...write,
          value: withPositions(write.value, positions, first, prepared.length),
          position: positions[eventOf(write.position) - 1]!,
        })),
      );
      return { streamId: request.streamId, nextVersion: recorded.at(-1)!.version, recorded };
    });
  }

  /**
   * The stream's head after a committed append, for its claim. An append that finishes its run,
   * lets its claim go or has no fence leaves nothing worth knowing: the next one reads afresh.
   */
  learnHead(request: AppendRequest, recorded: ReadonlyArray<RecordedEvent>): void {
    const { fence, streamId } = request;
    const last = recorded.at(-1);
    const finishes = request.events.some((e) => guardWritesFor(e).some((w) => w.kind === "finish"));
    if (!fence || !last || request.releaseClaim || finishes) {
      this.forget(streamId);
      return;
    }
    this.heads.set(streamId, { ...fence, version: last.version, hash: last.hash });
  }

  /** Projection rows as a committed append left them (stored in the clear: no payload keys). */
  learnRows(rows: ReadonlyArray<ProjectionRowWrite>): void {
    for (const { name, key, value, position } of rows)
      this.rows.set(rowId(name, key), { name, key, value, position });
  }

  /** Something this journal knew of a stream may be wrong: ask the database next time. */
  forget(streamId: string): void {
    this.heads.delete(streamId);
  }

  /** The rows the events touch, folded from the known values with stand-in positions. */
  private fold(
    prepared: ReadonlyArray<PreparedEvent>,
    first: number,
    positionOf: (n: number) => number,
    known: Prefetched,
  ): ProjectionRowWrite[] {
    const recorded = prepared.map((row, i) => recordedOf(row, positionOf(first + i)));
    return runSync(foldProjectionRows(this.sql, recorded, this.projections, null, known), (step) => {
      throw new Error(`a planned append reads nothing, and it asked for: ${JSON.stringify(step)}`);
    });
  }
}

/** Replace the stand-ins of events `first…first+count-1` with their positions, as `append_owned` does. */
const withPositions = (
  value: string,
  positions: ReadonlyArray<number>,
  first: number,
  count: number,
): string => {
  let text = value;
  for (let n = first; n < first + count; n++)
    text = text.replaceAll(String(standIn(n)), String(positions[n - 1]));
  return text;
};

/**
 * Whether replacing the stand-ins of events `first…first+count-1` in `value` with positions gives
 * the value the fold would give with those positions: every stand-in stands alone (no digit either
 * side), and folding with other stand-ins changed the value exactly where the first ones are. A
 * value that copies a stand-in's digits from an event's content, or derives anything from a
 * position, takes the transaction path.
 */
const positionsOnlyWherePrinted = (value: string, check: string, first: number, count: number): boolean => {
  let swapped = value;
  for (let n = first; n < first + count; n++) {
    const stand = String(standIn(n));
    if (new RegExp(`\\d${stand}|${stand}\\d`).test(value)) return false;
    if (check.includes(stand) || value.includes(String(checkIn(n)))) return false;
    swapped = swapped.replaceAll(stand, String(checkIn(n)));
  }
  return swapped === check;
};

/** A caller waiting for its append. */
export interface Caller {
  readonly resolve: (results: AppendResult[]) => void;
  readonly reject: (error: unknown) => void;
}

/** `append_owned`'s parameters (migration 5). */
const APPEND_OWNED_PARAMETERS = Array.from({ length: 24 }, () => "?").join(", ");

/**
 * What became of an owned append: its callers answered; refused (the statement wrote nothing — an
 * assumption had moved, or the server refused it — and the batch goes the transaction path, which
 * reads everything afresh and refuses what it must); or lost with the connection after the
 * statement left, so it may have committed: the journal reads its events back (decision 0068).
 */
export type OwnedAppendResult =
  | "answered"
  | "refused"
  | { readonly lost: string; readonly eventIds: ReadonlyArray<string> };

/** Run owners' appends in one autocommitted statement (see the top of this file), all or none. */
export const appendOwned = async (
  pool: pg.Pool,
  schema: string,
  location: string,
  owned: OwnedAppends,
  plan: OwnedPlan,
  batch: ReadonlyArray<Caller>,
  onCommitted: () => void,
): Promise<OwnedAppendResult> => {
  const streams = plan.requests.map((r) => r.request.streamId);
  const forget = () => {
    for (const streamId of streams) owned.forget(streamId);
  };
  let client: pg.PoolClient;
  try {
    client = await checkout(pool);
  } catch {
    return "refused";
  }
  let positions: ReadonlyArray<string> | null;
  try {
    const result = await client.query<{ positions: string[] | null }>(
      prepared(
        `SELECT ${schema}.append_owned(${APPEND_OWNED_PARAMETERS}) AS positions`,
        owned.parameters(plan),
      ),
    );
    positions = result.rows[0]?.positions ?? null;
  } catch (error) {
    forget();
    if (refusedBeforeCommit(error) && !ended.has(client)) {
      // A statement the server refused with an ERROR, in autocommit, wrote nothing.
      giveBack(client);
      return "refused";
    }
    giveBack(client, true);
    return {
      lost: describe(error),
      eventIds: plan.requests.flatMap((r) => r.prepared.map((e) => e.eventId)),
    };
  }
  giveBack(client);
  if (!positions) {
    forget();
    return "refused";
  }
  return answerOwned(location, owned, plan, batch, positions.map(Number), onCommitted);
};

/**
 * Answer the callers of a plan that committed with these positions (one per event, in the plan's
 * order): as the statement returned them, or as a lost commit's events were read back.
 */
export const answerOwned = (
  location: string,
  owned: OwnedAppends,
  plan: OwnedPlan,
  batch: ReadonlyArray<Caller>,
  positions: ReadonlyArray<number>,
  onCommitted: () => void,
): "answered" => {
  const streams = plan.requests.map((r) => r.request.streamId);
  let results: AppendResult[];
  try {
    results = owned.committed(plan, positions);
  } catch (error) {
    for (const streamId of streams) owned.forget(streamId);
    const failure = new JournalUnavailable({
      location,
      reason: `the append to ${streams.join(", ")} was committed but ${describe(error)}`,
      hint: "Run `holdfast audit` on this journal before going on.",
    });
    for (const pending of batch) pending.reject(failure);
    return "answered";
  }
  onCommitted();
  for (const [i, pending] of batch.entries()) pending.resolve([results[i]!]);
  return "answered";
};
