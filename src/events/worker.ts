import * as Schema from "effect/Schema";

/** A worker took ownership of a run (first claim or take-over after lease expiry). */
export const RunClaimed = Schema.Struct({
  type: Schema.tag("run.claimed"),
  runId: Schema.String,
  workerId: Schema.String,
  epoch: Schema.Int.pipe(Schema.positive()),
  previousWorkerId: Schema.NullOr(Schema.String),
});

export const WorkerEvent = Schema.Union(RunClaimed);
export type WorkerEvent = typeof WorkerEvent.Type;
