import { digestOf, type OutcomeSource, type RecordedEvent } from "../../events/index.js";
import { sourceOutcomeOf } from "../fork.js";
import type { AuditFinding } from "./findings.js";

/** A fork's reused outcome to look up in its source run (decision 0083). */
export interface ForkCheck {
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly callId: string;
  readonly source: OutcomeSource;
  /** Digest of what the fork recorded: `{ result }` or `{ error }`. */
  readonly digest: string;
}

/**
 * The fork checks of the audit (decision 0083): each reused outcome of a forked run names the
 * source event it copies; the driver reads that event and the outcome must be the same. A source
 * that is gone is a finding unless retention removed its run (decided at the end).
 */
export class ForkChecks {
  private pending: ForkCheck[] = [];
  private readonly missing = new Map<string, AuditFinding[]>();

  check(recorded: RecordedEvent): void {
    const { event } = recorded;
    if ((event.type !== "call.completed" && event.type !== "call.failed") || !event.reused) return;
    this.pending.push({
      streamId: recorded.streamId,
      version: recorded.version,
      position: recorded.position,
      callId: event.callId,
      source: event.reused,
      digest: digestOf(event.type === "call.completed" ? { result: event.result } : { error: event.error }),
    });
  }

  take(): ForkCheck[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }

  /** What the driver read at the source's coordinates (undefined: no such event). */
  found(check: ForkCheck, source: RecordedEvent | undefined): AuditFinding | null {
    const at = { streamId: check.streamId, version: check.version, position: check.position };
    const { runId, callId, version, eventId, hash } = check.source;
    const named = `the outcome of ${check.callId} is reused from ${callId} (run ${runId}, version ${version})`;
    if (!source) {
      const finding: AuditFinding = {
        ...at,
        kind: "fork-mismatch",
        detail: `${named}, but the source run has no event there`,
      };
      const list = this.missing.get(runId) ?? [];
      list.push(finding);
      this.missing.set(runId, list);
      return null;
    }
    if (source.eventId !== eventId || source.hash !== hash)
      return {
        ...at,
        kind: "fork-mismatch",
        detail: `${named}, event ${eventId} with hash ${hash.slice(0, 12)}, but the source's event there is ${source.eventId} with hash ${source.hash.slice(0, 12)}`,
      };
    const outcome = sourceOutcomeOf(source.event, callId);
    if (!outcome)
      return {
        ...at,
        kind: "fork-mismatch",
        detail: `${named}, but that event records no outcome of ${callId}`,
      };
    if (digestOf(outcome) !== check.digest)
      return {
        ...at,
        kind: "fork-mismatch",
        detail: `${named}, but it differs from what the source recorded: the fork's copy was altered`,
      };
    return null;
  }

  /**
   * The findings of sources that are gone, but for runs retention removed on purpose: `pruned` says
   * so for a run id. Decided here, at the end, since a source is often looked up after the
   * `retention.pruned` of its run was read (the same page, or an earlier one).
   */
  finish(pruned: (runId: string) => boolean): AuditFinding[] {
    return [...this.missing].filter(([runId]) => !pruned(runId)).flatMap(([, findings]) => findings);
  }
}
