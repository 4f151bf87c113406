import { canonicalJson, type RecordedEvent } from "../../events/index.js";
import { type AnyProjection, handles } from "../../projections/index.js";
import type { StoredProjectionRow } from "../Journal.js";
import type { AuditFinding, Findings } from "./findings.js";

interface RebuiltRow {
  state: unknown;
  position: number;
  streamId: string;
  version: number;
}

/**
 * Every projection rebuilt from the events, and compared with the rows the journal stores: value
 * and position, as canonical JSON.
 */
export class RebuiltProjections {
  private readonly rebuilt = new Map<string, Map<string, RebuiltRow>>();
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly projections: ReadonlyArray<AnyProjection>,
    private readonly findings: Findings,
  ) {
    for (const p of projections) {
      this.rebuilt.set(p.name, new Map());
      this.counts.set(p.name, 0);
    }
  }

  /** Apply one event to every projection that handles it. */
  evolve(recorded: RecordedEvent): void {
    for (const projection of this.projections) {
      if (!handles(projection, recorded)) continue;
      const rows = this.rebuilt.get(projection.name)!;
      for (const key of projection.keysOf(recorded)) {
        const row = rows.get(key);
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
        rows.set(key, {
          state,
          position: recorded.position,
          streamId: recorded.streamId,
          version: recorded.version,
        });
      }
    }
  }

  /** Rows rebuilt per projection. */
  rowCounts(): Array<{ readonly name: string; readonly rows: number }> {
    return this.projections.map((p) => ({ name: p.name, rows: this.counts.get(p.name)! }));
  }

  /**
   * Compare a page of a projection's stored rows with the rebuilt ones. A stored row newer than
   * the audited log (`lastPosition`) is only a finding if the log did not move meanwhile.
   */
  compareStored(name: string, stored: ReadonlyArray<StoredProjectionRow>, lastPosition: number): void {
    const rows = this.rebuilt.get(name);
    if (!rows) return;
    for (const row of stored) {
      const mine = rows.get(row.key);
      const ahead = row.position > lastPosition;
      if (!mine) {
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
      rows.delete(row.key);
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
    const rows = this.rebuilt.get(name);
    if (!rows) return;
    for (const [key, mine] of rows) {
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
    rows.clear();
  }

  private report(ahead: boolean, finding: AuditFinding): void {
    if (ahead) this.findings.tentative(finding);
    else this.findings.add(finding);
  }
}

const normalize = (value: unknown): string => canonicalJson(JSON.parse(JSON.stringify(value ?? null)));

const describeDifference = (mine: RebuiltRow, stored: StoredProjectionRow): string | null => {
  let storedValue: string;
  try {
    storedValue = canonicalJson(JSON.parse(stored.value));
  } catch {
    return "the stored row is not JSON";
  }
  const fields: string[] = [];
  if (normalize(mine.state) !== storedValue) {
    const rebuilt = JSON.parse(normalize(mine.state)) as Record<string, unknown>;
    const kept = JSON.parse(storedValue) as Record<string, unknown>;
    const names =
      rebuilt && kept && typeof rebuilt === "object" && typeof kept === "object"
        ? [...new Set([...Object.keys(rebuilt), ...Object.keys(kept)])].filter(
            (k) => canonicalJson(rebuilt[k] ?? null) !== canonicalJson(kept[k] ?? null),
          )
        : [];
    fields.push(names.length > 0 ? `fields ${names.join(", ")} differ` : "the value differs");
  }
  if (mine.position !== stored.position)
    fields.push(`stored position ${stored.position}, rebuilt ${mine.position}`);
  return fields.length > 0 ? `the stored row differs from the rebuilt one: ${fields.join("; ")}` : null;
};
