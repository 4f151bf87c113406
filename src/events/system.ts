import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";
import { Json } from "./shared.js";

export const JournalOpened = Schema.Struct({
  type: Schema.tag("journal.opened"),
  schemaVersion: Schema.Int,
  engine: Schema.String,
});

/**
 * Retention removed finished runs; their heads stay here so what remains still verifies. `position`
 * is the global position of each removed head, so an anchored head digest (`D@P`) stays checkable.
 */
export const RetentionPruned = Schema.Struct({
  type: Schema.tag("retention.pruned"),
  streams: Schema.Array(
    Schema.Struct({ streamId: Schema.String, version: Schema.Int, hash: Digest, position: Schema.Int }),
  ),
});

export const BackupWritten = Schema.Struct({
  type: Schema.tag("backup.written"),
  path: Schema.String,
  headDigest: Digest,
  events: Schema.Int,
});

/**
 * A call's outcome that reached the runtime after retention had removed its run (law 5: recorded,
 * never dropped). The run's stream is gone, so the outcome is kept here, in the words of
 * `conflict.recorded`: `recorded` is what retention kept of the run (its final status), `attempted`
 * the outcome that arrived, masked like any outcome.
 */
export const OutcomeOrphaned = Schema.Struct({
  type: Schema.tag("outcome.orphaned"),
  runId: Schema.String,
  callId: Schema.String,
  attempt: Schema.Int,
  detail: Schema.String,
  recorded: Json,
  attempted: Json,
});

export const SystemEvent = Schema.Union(JournalOpened, RetentionPruned, BackupWritten, OutcomeOrphaned);
export type SystemEvent = typeof SystemEvent.Type;
