import { canonicalJson, type RecordedEvent } from "../../events/index.js";
import { type AnyProjection, handles } from "../../projections/index.js";
import type { StoredProjectionRow } from "../Journal.js";
import type { AuditFinding, Findings } from "./findings.js";
import type { AuditSpill } from "./spill.js";

/** A rebuilt row and the event that last changed it. */
interface RebuiltRow {
  readonly state: unknown;
  readonly position: number;
  readonly streamId: string;
  readonly version: number;
}

/** A rebuilt row as the spill keeps it: the value as JSON text. */
interface SetAsideRow {
  readonly value: string;
  readonly position: number;
  readonly streamId: string;
  readonly version: number;
}

const spaceOf = (projection: string): string => `rows:${projection}`;

// One line of JSON for where the row comes from, then the value's JSON (neither holds a newline).
const encode = (row: RebuiltRow): string =>
  `${JSON.stringify([row.position, row.version, row.streamId])}\n${JSON.stringify(row.state ?? null)}`;

const decode = (text: string): SetAsideRow => {
  const cut = text.indexOf("\n");
  const [position, version, streamId] = JSON.parse(text.slice(0, cut)) as [number, number, string];
  return { value: text.slice(cut + 1), position, version, streamId };
};

/**
 * Every projection rebuilt from the events, and compared with the rows the journal stores: value
 * and position, as canonical JSON.
 *
 * Memory is bounded: each projection keeps at most `rowsInMemory` rows at hand, the ones touched
 * last; older ones go to the spill as JSON text and come back if a later event touches them
 * (a chat's next run, a decision on a run held long ago). The comparison sets every row aside,
 * then takes from the spill only the rows of the stored page in hand: it holds one page of rows
 * at a time, and what is left in the spill at the end is missing from the journal.
 */
export class RebuiltProjections {
  /** Per projection, the rows at hand, least recently touched first. */
  private readonly atHand = new Map<string, Map<string, RebuiltRow>>();
  private readonly counts = new Map<string, number>();
  private comparing = false;

  constructor(
    private readonly projections: ReadonlyArray<AnyProjection>,
    private readonly findings: Findings,
    private readonly spill: AuditSpill,
    private readonly rowsInMemory: number,
  ) {
    for (const p of projections) {
      this.atHand.set(p.name, new Map());
      this.counts.set(p.name, 0);
    }
  }

  /** Apply one event to every projection that handles it. */
  evolve(recorded: RecordedEvent): void {
    if (this.comparing)
      throw new RangeError("the audit was fed an event after its projection comparison began");
    for (const projection of this.projections) {
      if (!handles(projection, recorded)) continue;
      const rows = this.atHand.get(projection.name)!;
      for (const key of projection.keysOf(recorded)) {
        const held = rows.get(key);
        const row = held ?? this.fromSpill(projection.name, key);
        let state: unknown;
        try {
          state = projection.evolve(row?.state, recorded, key);
        } catch (error) {
          // The write path would have refused this event; an earlier finding usually explains it.
          if (!this.findings.rowHasFinding)
            this.findings.add({
              streamId: recorded.streamId,
              version: recorded.version,
              position: recorded.position,
              kind: "projection-rejected",
              detail: `${projection.name}: ${error instanceof Error ? error.message : String(error)}`,
              projection: projection.name,
              key,
            });
          continue;
        }
        if (!row) this.counts.set(projection.name, this.counts.get(projection.name)! + 1);
        if (held) rows.delete(key);
        rows.set(key, {
          state,
          position: recorded.position,
          streamId: recorded.streamId,
          version: recorded.version,
        });
        if (rows.size > this.rowsInMemory) this.setAsideOldest(projection.name, rows);
      }
    }
  }

  private fromSpill(projection: string, key: string): RebuiltRow | undefined {
    const text = this.spill.get(spaceOf(projection), key);
    if (text === undefined) return undefined;
    const { value, ...from } = decode(text);
    return { ...from, state: JSON.parse(value) };
  }

  /** Make room for a quarter of the rows at once: fewer, larger hand-overs to the spill. */
  private setAsideOldest(projection: string, rows: Map<string, RebuiltRow>): void {
    let excess = rows.size - Math.floor((this.rowsInMemory * 3) / 4);
    const space = spaceOf(projection);
    for (const [key, row] of rows) {
      if (excess-- <= 0) break;
      this.spill.put(space, key, encode(row));
      rows.delete(key);
    }
  }

  /** Once the log is read: every row goes to the spill, from where the comparison takes a page at a time. */
  private setAsideAll(): void {
    if (this.comparing) return;
    this.comparing = true;
    for (const [projection, rows] of this.atHand) {
      const space = spaceOf(projection);
      for (const [key, row] of rows) this.spill.put(space, key, encode(row));
      rows.clear();
    }
  }

  /** Rows rebuilt per projection. */
  rowCounts(): Array<{ readonly name: string; readonly rows: number }> {
    return this.projections.map((p) => ({ name: p.name, rows: this.counts.get(p.name)! }));
  }

  /** Rebuilt rows held in memory now. */
  retained(): number {
    let rows = 0;
    for (const held of this.atHand.values()) rows += held.size;
    return rows;
  }

  /**
   * Compare a page of a projection's stored rows with the rebuilt ones. A stored row newer than
   * the audited log (`lastPosition`) is only a finding if the log did not move meanwhile.
   */
  compareStored(name: string, stored: ReadonlyArray<StoredProjectionRow>, lastPosition: number): void {
    if (!this.atHand.has(name)) return;
    this.setAsideAll();
    const rebuilt = this.spill.take(
      spaceOf(name),
      stored.map((row) => row.key),
    );
    for (const row of stored) {
      const text = rebuilt.get(row.key);
      const ahead = row.position > lastPosition;
      if (text === undefined) {
        this.report(ahead, {
          streamId: null,
          version: null,
          position: row.position,
          kind: "projection-extra",
          detail: ahead
            ? `a stored row claims position ${row.position}, beyond the end of the log (${lastPosition})`
            : "a stored row that no event produces",
          projection: name,
          key: row.key,
        });
        continue;
      }
      const mine = decode(text);
      const difference = describeDifference(mine, row);
      if (!difference) continue;
      this.report(ahead, {
        streamId: mine.streamId,
        version: mine.version,
        position: mine.position,
        kind: "projection-different",
        detail: difference,
        projection: name,
        key: row.key,
      });
    }
  }

  /** After every stored page of a projection: rebuilt rows never seen are missing. */
  endProjection(name: string): void {
    if (!this.atHand.has(name)) return;
    this.setAsideAll();
    for (const [key, text] of this.spill.drain(spaceOf(name))) {
      const mine = decode(text);
      this.findings.add({
        streamId: mine.streamId,
        version: mine.version,
        position: mine.position,
        kind: "projection-missing",
        detail: "the events produce this row, but it is not stored",
        projection: name,
        key,
      });
    }
  }

  private report(ahead: boolean, finding: AuditFinding): void {
    if (ahead) this.findings.tentative(finding);
    else this.findings.add(finding);
  }
}

/**
 * Two JSON values are equal as canonical JSON (RFC 8785) exactly when they are structurally equal:
 * same keys with equal values in any order, same array items, numbers and strings equal. Comparing
 * the parsed values says so without canonicalising either side.
 */
const sameJson = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) return false;
  for (const key of keys) if (!Object.hasOwn(right, key) || !sameJson(left[key], right[key])) return false;
  return true;
};

const describeDifference = (mine: SetAsideRow, stored: StoredProjectionRow): string | null => {
  const fields: string[] = [];
  if (stored.value !== mine.value) {
    let kept: unknown;
    try {
      kept = JSON.parse(stored.value);
    } catch {
      return "the stored row is not JSON";
    }
    const rebuilt: unknown = JSON.parse(mine.value);
    if (!sameJson(rebuilt, kept)) {
      const names =
        rebuilt && kept && typeof rebuilt === "object" && typeof kept === "object"
          ? [...new Set([...Object.keys(rebuilt), ...Object.keys(kept)])].filter(
              (k) =>
                canonicalJson((rebuilt as Record<string, unknown>)[k] ?? null) !==
                canonicalJson((kept as Record<string, unknown>)[k] ?? null),
            )
          : [];
      fields.push(names.length > 0 ? `fields ${names.join(", ")} differ` : "the value differs");
    }
  }
  if (mine.position !== stored.position)
    fields.push(`stored position ${stored.position}, rebuilt ${mine.position}`);
  return fields.length > 0 ? `the stored row differs from the rebuilt one: ${fields.join("; ")}` : null;
};
