import type { Projection } from "./projection.js";

export interface ConflictRow {
  readonly runId: string;
  readonly callId: string | null;
  readonly kind: "outcome" | "determinism";
  readonly detail: string;
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
}

/** Every recorded conflict, one row each. */
export const conflictsProjection: Projection<ConflictRow> = {
  name: "conflicts",
  version: 1,
  canHandle: ["conflict.recorded"],
  keysOf: (recorded) => [`${recorded.streamId}@${recorded.version}`],
  evolve: (_state, recorded) => {
    const e = recorded.event;
    if (e.type !== "conflict.recorded") throw new RangeError(`conflicts projection cannot handle ${e.type}`);
    return {
      runId: e.runId,
      callId: e.callId ?? null,
      kind: e.kind,
      detail: e.detail,
      streamId: recorded.streamId,
      version: recorded.version,
      position: recorded.position,
    };
  },
};
