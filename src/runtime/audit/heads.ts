import { sha256Hex } from "../../events/index.js";
import { anchorLoss, type PrunedHead, prunedAnchor } from "../anchor.js";
import type { HeadAnchor } from "../Journal.js";
import type { ExpectedHead } from "./expectedHead.js";
import type { AuditFinding } from "./findings.js";

export { type ExpectedHead, parseExpectedHead } from "./expectedHead.js";

/** A stream head as the head digest covers it. */
export interface Head {
  readonly streamId: string;
  readonly version: number;
  readonly hash: string;
}

const isSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdfff;

/**
 * UTF-8 byte order without encoding every pair of ids the sort compares: up to their first
 * differing UTF-16 unit two strings encode alike, and two differing units outside the surrogate
 * range order as their UTF-8 bytes do. Only a surrogate there (a pair, or a lone one that UTF-8
 * writes as U+FFFD) needs the bytes themselves.
 */
const utf8Order = (a: string, b: string): number => {
  const common = Math.min(a.length, b.length);
  for (let i = 0; i < common; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    return isSurrogate(x) || isSurrogate(y) ? Buffer.compare(Buffer.from(a), Buffer.from(b)) : x - y;
  }
  return a.length === b.length ? 0 : Buffer.compare(Buffer.from(a), Buffer.from(b));
};

/**
 * The head digest: sha256 (hex) of the UTF-8 text made of one line `streamId:version:hash\n` per
 * stream head, sorted by stream id in UTF-8 byte order. The empty log's digest is sha256("").
 *
 * @example
 * headDigest([{ streamId: "system", version: 1, hash: "ab…" }]);
 */
export const headDigest = (heads: Iterable<Head>): string =>
  sha256Hex(
    [...heads]
      .sort((a, b) => utf8Order(a.streamId, b.streamId))
      .map((h) => `${h.streamId}:${h.version}:${h.hash}\n`)
      .join(""),
  );

/** What the report says about `--expect-head`. */
export type ExpectedHeadResult = ExpectedHead & { readonly actual: string; readonly matches: boolean };

/**
 * `--expect-head D[@P]`: the heads as of the anchor's position (taken when the first row beyond it
 * arrives), plus the heads retention recorded for streams whose last event was at or before it.
 */
export class ExpectedHeadCheck {
  private atAnchor: Head[] | null = null;
  /** Heads removed by retention at or before the anchor position. */
  private readonly pruned: Head[] = [];

  constructor(private readonly expected: ExpectedHead | null) {}

  /** Before a row is checked: past the anchor's position, the heads as they stood are kept. */
  beforeRow(position: number, heads: () => Head[]): void {
    const at = this.expected?.position;
    if (at != null && this.atAnchor === null && position > at) this.atAnchor = heads();
  }

  notePruned(entry: PrunedHead): void {
    const at = this.expected?.position;
    if (at != null && entry.position <= at) this.pruned.push(entry);
  }

  finish(
    current: Head[],
    currentDigest: string,
    lastPosition: number,
  ): { readonly result: ExpectedHeadResult | null; readonly finding: AuditFinding | null } {
    if (!this.expected) return { result: null, finding: null };
    const { digest, position } = this.expected;
    let actual = currentDigest;
    if (position !== null) {
      const atAnchor = new Map((this.atAnchor ?? current).map((h) => [h.streamId, h]));
      for (const h of this.pruned) if (!atAnchor.has(h.streamId)) atAnchor.set(h.streamId, h);
      actual = position > lastPosition && this.atAnchor === null ? "" : headDigest(atAnchor.values());
    }
    const matches = actual === digest;
    const result = { digest, position, actual, matches };
    if (matches) return { result, finding: null };
    return {
      result,
      finding: {
        streamId: null,
        version: null,
        kind: "head-mismatch",
        detail:
          position === null
            ? `the head digest is ${currentDigest}, not the expected ${digest}: an event was removed from the end of a stream, or events were appended since the digest was taken (anchor with D@P to allow appends)`
            : actual === ""
              ? `the log ends at position ${lastPosition}, before the anchor's position ${position}: its tail was removed`
              : `the heads as of position ${position} hash to ${actual}, not the expected ${digest}: an event at or before that position was removed or changed (or a run active then was pruned since)`,
      },
    };
  }
}

/**
 * The journal's own head anchor (libSQL): the log must still hold the event it names, unless
 * retention recorded removing it (`lost-commits`).
 */
export class HeadAnchorCheck {
  /** The hash of the event at the anchor's position, once fed. */
  private found: string | null = null;
  /** Heads retention removed after the anchored event, of the anchored event's stream. */
  private readonly removed: PrunedHead[] = [];

  constructor(private readonly anchor: HeadAnchor | null) {}

  noteRow(position: number, hash: string): void {
    if (position === this.anchor?.position) this.found = hash;
  }

  notePruned(entry: PrunedHead, prunedAt: number): void {
    if (this.anchor && entry.streamId === this.anchor.streamId && prunedAt > this.anchor.position)
      this.removed.push(entry);
  }

  finish(lastPosition: number): {
    readonly anchor: (HeadAnchor & { readonly holds: boolean }) | null;
    readonly finding: AuditFinding | null;
  } {
    if (!this.anchor) return { anchor: null, finding: null };
    const loss = anchorLoss(this.anchor, this.found, lastPosition, prunedAnchor(this.anchor, this.removed));
    return {
      anchor: { ...this.anchor, holds: loss === null },
      finding: loss
        ? {
            streamId: this.anchor.streamId || null,
            version: this.anchor.streamId ? this.anchor.version : null,
            position: this.anchor.position,
            kind: "lost-commits",
            detail: loss,
          }
        : null,
    };
  }
}
