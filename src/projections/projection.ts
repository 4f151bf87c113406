import type { EventType, RecordedEvent } from "../events/index.js";

/**
 * A read model: a pure fold over recorded events, one row per key. Inline projections are updated
 * in the append transaction; `rebuild` recomputes them from zero and must find them equal.
 */
export interface Projection<S> {
  readonly name: string;
  /** Bumped when `evolve` changes; a stored projection of another version is rebuilt. */
  readonly version: number;
  readonly canHandle: ReadonlyArray<EventType>;
  /** The rows an event updates (usually one). */
  readonly keysOf: (recorded: RecordedEvent) => ReadonlyArray<string>;
  readonly evolve: (state: S | undefined, recorded: RecordedEvent, key: string) => S;
  /**
   * For a row the runs of one chat share: the runs whose events its value comes from. Retention
   * removes whole finished runs and updates only the rows their events made: a shared row that
   * comes from none of the removed runs stands as stored; another is folded again from its chat's
   * remaining runs. Absent: every event of a key is in one stream, so the row goes with it.
   */
  readonly drawsOn?: (state: S) => ReadonlyArray<string>;
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous list of projections
export type AnyProjection = Projection<any>;

export const handles = (projection: AnyProjection, recorded: RecordedEvent): boolean =>
  projection.canHandle.includes(recorded.event.type);

/** Fold a projection over events in memory (rebuild and audit use this; so do tests). */
export const foldProjection = <S>(
  projection: Projection<S>,
  events: Iterable<RecordedEvent>,
): Map<string, S> => {
  const rows = new Map<string, S>();
  for (const recorded of events) {
    if (!handles(projection, recorded)) continue;
    for (const key of projection.keysOf(recorded))
      rows.set(key, projection.evolve(rows.get(key), recorded, key));
  }
  return rows;
};
