import { GENESIS_HASH, rowHash, type StoredRow } from "./envelope.js";

/** Where a stream's hash chain breaks, if it does. */
export interface ChainBreak {
  readonly streamId: string;
  readonly version: number;
  readonly reason: string;
}

/**
 * Verify one stream's chain over its stored rows (what is stored is what is chained, so this needs
 * no key when payloads are encrypted): versions contiguous from 1, each `prevHash` equal to the
 * previous `hash`, each `hash` recomputed from the stored payload.
 */
export const verifyStreamChain = (rows: ReadonlyArray<StoredRow>): ChainBreak | null => {
  let prev = GENESIS_HASH;
  for (const [i, row] of rows.entries()) {
    if (row.version !== i + 1) {
      return {
        streamId: row.streamId,
        version: row.version,
        reason: `expected version ${i + 1}, found ${row.version}`,
      };
    }
    if (row.prevHash !== prev) {
      return {
        streamId: row.streamId,
        version: row.version,
        reason: "prevHash does not match the previous event's hash",
      };
    }
    if (rowHash(row) !== row.hash) {
      return { streamId: row.streamId, version: row.version, reason: "hash does not match the stored event" };
    }
    prev = row.hash;
  }
  return null;
};
