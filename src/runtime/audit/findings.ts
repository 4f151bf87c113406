/** Every kind of finding, in the order docs/audit.md explains them. */
export const FINDING_KINDS = [
  "undecodable",
  "version-gap",
  "prev-hash-mismatch",
  "hash-mismatch",
  "wrong-stream",
  "unknown-machine",
  "transition-rejected",
  "outcome-without-intent",
  "replay-without-authorization",
  "duplicate-outcome",
  "decision-not-held",
  "retry-before-due",
  "wake-without-due",
  "wake-before-due",
  "signal-not-recorded",
  "effect-before-approval",
  "checkpoint-mismatch",
  "result-mismatch",
  "undecryptable",
  "admission-mismatch",
  "guard-mismatch",
  "queue-mismatch",
  "schedule-mismatch",
  "fork-mismatch",
  "projection-rejected",
  "projection-missing",
  "projection-extra",
  "projection-different",
  "pruned-stream-present",
  "head-mismatch",
  "lost-commits",
  "anchor-damaged",
] as const;
/** What kind of problem a finding is (`prev-hash-mismatch`, `projection-different`, …). */
export type FindingKind = (typeof FINDING_KINDS)[number];

/**
 * One problem. `streamId`/`version` name the event it is about; they are null only for what no
 * event names (a projection row no event produced, a head digest that differs).
 */
export interface AuditFinding {
  readonly kind: FindingKind;
  readonly streamId: string | null;
  readonly version: number | null;
  readonly detail: string;
  readonly position?: number;
  readonly projection?: string;
  readonly key?: string;
}

/** A finding about an event, before the event's coordinates are added. */
export interface Breach {
  readonly kind: FindingKind;
  readonly detail: string;
}

/**
 * The findings of one audit: the first `max` kept, the rest counted. A finding about a cache row
 * newer than the audited log is held back until the audit knows whether the log moved meanwhile.
 */
export class Findings {
  private readonly kept: AuditFinding[] = [];
  private omittedCount = 0;
  private held: AuditFinding[] = [];
  /** Whether the row being checked has a finding yet (later checks of the row defer to it). */
  rowHasFinding = false;

  constructor(private readonly max: number) {}

  add(finding: AuditFinding): void {
    this.rowHasFinding = true;
    if (this.kept.length < this.max) this.kept.push(finding);
    else this.omittedCount += 1;
  }

  /** A finding that stands only if the log did not move during the audit. */
  tentative(finding: AuditFinding): void {
    this.held.push(finding);
  }

  /** Keep the tentative findings unless the log moved. */
  settle(moved: boolean): void {
    if (!moved) for (const f of this.held) this.add(f);
    this.held = [];
  }

  get list(): ReadonlyArray<AuditFinding> {
    return this.kept;
  }

  get omitted(): number {
    return this.omittedCount;
  }
}
