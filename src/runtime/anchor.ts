import type { HeadAnchor } from "./Journal.js";

/** A stream head as `retention.pruned` records it for each stream it removed. */
export interface PrunedHead {
  readonly streamId: string;
  readonly version: number;
  readonly hash: string;
  readonly position: number;
}

/**
 * Whether retention accounts for the anchored event being gone: a `retention.pruned` names the
 * anchored event's stream with a head at or after it. Positions are never reused, so nothing else
 * removes an event and leaves a journal that is whole.
 */
export const prunedAnchor = (anchor: HeadAnchor, removed: Iterable<PrunedHead>): boolean => {
  for (const head of removed) {
    if (head.streamId !== anchor.streamId || head.position < anchor.position) continue;
    if (head.position > anchor.position || head.hash === anchor.hash) return true;
  }
  return false;
};

const short = (hash: string): string => `${hash.slice(0, 12)}…`;

/** The anchored event, as words: `run-x@4 (position 17, hash 0a1b…)`. */
export const describeAnchor = (anchor: HeadAnchor): string =>
  `${anchor.streamId}@${anchor.version} (position ${anchor.position}, hash ${short(anchor.hash)})`;

/**
 * What the journal lost against its head anchor, in words; null when nothing is lost.
 * `found`: the hash of the event the journal holds at the anchored position (null: none there);
 * `lastPosition`: the journal's last position (0: empty); `pruned`: see {@link prunedAnchor}.
 */
export const anchorLoss = (
  anchor: HeadAnchor,
  found: string | null,
  lastPosition: number,
  pruned: boolean,
): string | null => {
  if (anchor.position === 0) return null;
  if (found !== null) {
    if (found === anchor.hash) return null;
    return `the event at position ${anchor.position} has hash ${short(found)}, not the one the head anchor records for ${describeAnchor(anchor)}: the journal was replaced or rewritten`;
  }
  if (pruned) return null;
  if (lastPosition < anchor.position) {
    return `the head anchor records ${describeAnchor(anchor)} as committed, but the journal ends at position ${lastPosition}: the commits after it are gone (a WAL cut short or removed, a file cut short or emptied, or its tail deleted)`;
  }
  return `the journal has no event at position ${anchor.position}, which the head anchor records as ${describeAnchor(anchor)}, and no retention removed it: events were deleted`;
};
