import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";

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

export const SystemEvent = Schema.Union(JournalOpened, RetentionPruned, BackupWritten);
export type SystemEvent = typeof SystemEvent.Type;
