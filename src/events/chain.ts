import { chainHash, encodePayload, GENESIS_HASH, type RecordedEvent } from "./envelope.js";

/** Where a stream's hash chain breaks, if it does. */
export interface ChainBreak {
  readonly streamId: string;
  readonly version: number;
  readonly reason: string;
}

/**
 * Verify one stream's chain from decoded events: versions contiguous from 1, each `prevHash`
 * equal to the previous `hash`, each `hash` recomputed from the stored payload.
 */
export const verifyStreamChain = (events: ReadonlyArray<RecordedEvent>): ChainBreak | null => {
  let prev = GENESIS_HASH;
  for (const [i, e] of events.entries()) {
    if (e.version !== i + 1) {
      return {
        streamId: e.streamId,
        version: e.version,
        reason: `expected version ${i + 1}, found ${e.version}`,
      };
    }
    if (e.prevHash !== prev) {
      return {
        streamId: e.streamId,
        version: e.version,
        reason: "prevHash does not match the previous event's hash",
      };
    }
    const recomputed = chainHash({ ...e, data: encodePayload(e.event) });
    if (recomputed !== e.hash) {
      return { streamId: e.streamId, version: e.version, reason: "hash does not match the stored event" };
    }
    prev = e.hash;
  }
  return null;
};
