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
import type { RecordedEvent } from "../../events/index.js";
import type { AnyProjection } from "../../projections/index.js";
import type { AppendRequest, AppendResult } from "../../runtime/Journal.js";
import {
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

/** How many streams and rows the owner remembers; the oldest go first. */
const REMEMBERED = 4096;

/**
 * The stand-in position of the `n`-th event (from 1) while rows are folded before the insert hands
 * out positions: 16 digits, far above any position, printed by JSON as digits.
 */
const STAND_IN = 9_000_000_000_000_000;
/** A second set, to check that a row's value depends on positions only where they are printed. */
const CHECK = 8_000_000_000_000_000;

interface KnownHead {
  readonly runId: string;
  readonly workerId: string;
  readonly epoch: number;
  readonly version: number;
  readonly hash: string;
}

/** A request ready for `append_owned`, and what its success will be. */
export interface OwnedPlan {
  readonly request: AppendRequest;
  readonly prepared: ReadonlyArray<PreparedEvent>;
  /** The rows' new values with stand-ins, and the event (from 1) whose position each row takes. */
  readonly rows: ReadonlyArray<{ readonly write: ProjectionRowWrite; readonly event: number }>;
  readonly known: ReadonlyArray<ProjectionRowRead>;
  readonly head: KnownHead;
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
  get size(): number {
    return this.entries.size;
  }
}

/** The heads and rows a journal's own fenced appends committed, and the plans made from them. */
export class OwnedAppends {
  private readonly heads = new Bounded<KnownHead>();
  private readonly rows = new Bounded<ProjectionRowRead>();

  constructor(
    private readonly sql: Statements,
    private readonly projections: ReadonlyArray<AnyProjection>,
  ) {}

  /**
   * The plan for a request if it can go in one statement: fenced, releasing nothing, no admission
   * or finished run (those are unique keys' and the run guard's), at the head this journal
   * committed last for the same claim, every row it touches known. Else null.
   */
  plan(request: AppendRequest): OwnedPlan | null {
    const { fence, streamId, expectedVersion, events } = request;
    if (!fence || request.releaseClaim || typeof expectedVersion !== "number" || events.length === 0)
      return null;
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
      if (!row) return null;
      known.set(wanted.id, row);
    }
    const prepared = prepareEvents(streamId, head, events, null);
    const folded = this.fold(prepared, STAND_IN, known);
    const check = this.fold(prepared, CHECK, known);
    const rows: Array<{ write: ProjectionRowWrite; event: number }> = [];
    for (const [i, write] of folded.entries()) {
      if (!positionsOnlyWherePrinted(write.value, check[i]!.value, prepared.length)) return null;
      rows.push({ write, event: write.position - STAND_IN });
    }
    return { request, prepared, rows, known: [...known.values()], head };
  }

  /** The parameters of `append_owned` for a plan. */
  parameters(plan: OwnedPlan): unknown[] {
    const { request, prepared, rows, known, head } = plan;
    const fence = request.fence!;
    return [
      fence.runId,
      fence.workerId,
      fence.epoch,
      request.streamId,
      head.version,
      head.hash,
      prepared.map((e) => e.eventId),
      prepared.map((e) => e.event.type),
      prepared.map((e) => e.schemaVersion),
      prepared.map((e) => e.recordedAt),
      prepared.map((e) => e.dataText),
      prepared.map((e) => e.prevHash),
      prepared.map((e) => e.hash),
      known.map((r) => r.name),
      known.map((r) => r.key),
      known.map((r) => r.value),
      known.map((r) => String(r.position)),
      rows.map((r) => r.write.value),
      rows.map((r) => r.event),
      prepared.map((_, i) => String(STAND_IN + i + 1)),
    ];
  }

  /** The plan committed at these positions: its result, and what the owner now knows. */
  committed(plan: OwnedPlan, positions: ReadonlyArray<number>): AppendResult {
    const recorded = plan.prepared.map((row, i) => recordedOf(row, positions[i]!));
    const written = plan.rows.map(({ write }) => ({
      ...write,
      value: withPositions(write.value, positions),
      position: positions[write.position - STAND_IN - 1]!,
    }));
    this.learn(plan.request, recorded, written);
    return { streamId: plan.request.streamId, nextVersion: recorded.at(-1)!.version, recorded };
  }

  /**
   * What a committed append tells the owner: the stream's head for its claim and the rows it wrote.
   * Rows not told (`undefined`: a batch decided in memory), an admission, a finished run or a claim
   * let go leave nothing to know: the next append reads afresh.
   */
  learn(
    request: AppendRequest,
    recorded: ReadonlyArray<RecordedEvent>,
    rows: ReadonlyArray<ProjectionRowWrite> | undefined,
  ): void {
    const { fence, streamId } = request;
    const last = recorded.at(-1);
    if (
      !fence ||
      !last ||
      !rows ||
      request.releaseClaim ||
      request.events.some((e) => guardWritesFor(e).length > 0)
    ) {
      this.forget(streamId);
      return;
    }
    this.heads.set(streamId, { ...fence, version: last.version, hash: last.hash });
    for (const row of rows) this.rows.set(rowId(row.name, row.key), { ...row });
  }

  /** Something this journal knew of a stream may be wrong: ask the database next time. */
  forget(streamId: string): void {
    this.heads.delete(streamId);
  }

  /** The rows the events touch, folded from the known values with the given stand-in positions. */
  private fold(
    prepared: ReadonlyArray<PreparedEvent>,
    base: number,
    known: Prefetched,
  ): ProjectionRowWrite[] {
    const recorded = prepared.map((row, i) => recordedOf(row, base + i + 1));
    return runSync(foldProjectionRows(this.sql, recorded, this.projections, null, known), (step) => {
      throw new Error(`a planned append reads nothing, and it asked for: ${JSON.stringify(step)}`);
    });
  }
}

/** Replace each event's stand-in with its position, as `append_owned` does. */
const withPositions = (value: string, positions: ReadonlyArray<number>): string =>
  positions.reduce((text, position, i) => text.replaceAll(String(STAND_IN + i + 1), String(position)), value);

/**
 * Whether replacing the stand-ins of `value` with positions gives the value the fold would give
 * with those positions: every stand-in stands alone (no digit either side), and folding with other
 * stand-ins changed the value exactly where the first ones are. A value that copies a stand-in's
 * digits from an event's content, or derives anything from a position, takes the transaction path.
 */
const positionsOnlyWherePrinted = (value: string, check: string, events: number): boolean => {
  let swapped = value;
  for (let i = 1; i <= events; i++) {
    const standIn = String(STAND_IN + i);
    if (new RegExp(`\\d${standIn}|${standIn}\\d`).test(value)) return false;
    if (check.includes(standIn) || value.includes(String(CHECK + i))) return false;
    swapped = swapped.replaceAll(standIn, String(CHECK + i));
  }
  return swapped === check;
};
