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
  /** The fork's copy of the call's intent: its seq, kind, name and fingerprint must be the source's. */
  readonly intent?: {
    readonly seq: number;
    readonly kind: string;
    readonly name: string;
    readonly fingerprint: string;
  };
}

/** A fork's first commit as read so far: its source, and the reused seqs whose pointer is not yet seen. */
interface ForkState {
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly from: string;
  readonly unpointed: Set<number>;
  readonly intents: Map<string, NonNullable<ForkCheck["intent"]>>;
}

/**
 * The fork checks of the audit (decision 0083): each reused outcome of a forked run names the
 * source event it copies; the driver reads that event and the outcome must be the same. A source
 * that is gone is a finding unless retention removed its run (decided at the end).
 */
export class ForkChecks {
  private pending: ForkCheck[] = [];
  private readonly missing = new Map<string, AuditFinding[]>();
  /** Forks whose `run.forked` was read and whose reused seqs do not all have a pointer yet, by run id. */
  private readonly forks = new Map<string, ForkState>();

  /** A run event: returns a finding when a reused outcome names another run than the fork's source. */
  check(recorded: RecordedEvent): AuditFinding | null {
    const { event } = recorded;
    const at = { streamId: recorded.streamId, version: recorded.version, position: recorded.position };
    if (event.type === "run.forked") {
      if (event.reused.length > 0)
        this.forks.set(event.runId, {
          ...at,
          from: event.from.runId,
          unpointed: new Set(event.reused),
          intents: new Map(),
        });
      return null;
    }
    const fork = "runId" in event ? this.forks.get(event.runId) : undefined;
    if (event.type === "call.intended") {
      if (fork && event.attempt === 1)
        fork.intents.set(event.callId, {
          seq: event.seq,
          kind: event.kind,
          name: event.name,
          fingerprint: event.fingerprint,
        });
      return null;
    }
    if ((event.type !== "call.completed" && event.type !== "call.failed") || !event.reused) return null;
    const intent = fork?.intents.get(event.callId);
    if (fork && intent) {
      fork.unpointed.delete(intent.seq);
      if (fork.unpointed.size === 0) this.forks.delete(event.runId);
    }
    this.pending.push({
      ...at,
      callId: event.callId,
      source: event.reused,
      digest: digestOf(event.type === "call.completed" ? { result: event.result } : { error: event.error }),
      ...(intent ? { intent } : {}),
    });
    if (fork && event.reused.runId !== fork.from)
      return {
        ...at,
        kind: "fork-mismatch",
        detail: `the outcome of ${event.callId} is reused from run ${event.reused.runId}, but the fork's run.forked names ${fork.from} as its source`,
      };
    return null;
  }

  take(): ForkCheck[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }

  /**
   * What the driver read at the source's coordinates (undefined: no such event), and the source
   * call's latest intent before it (undefined: none found).
   */
  found(
    check: ForkCheck,
    source: RecordedEvent | undefined,
    sourceIntent?: {
      readonly seq: number;
      readonly kind: string;
      readonly name: string;
      readonly fingerprint: string;
    },
  ): AuditFinding | null {
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
    const mine = check.intent;
    if (mine) {
      const theirs = sourceIntent;
      if (!theirs)
        return {
          ...at,
          kind: "fork-mismatch",
          detail: `${named}, but the source run has no intent of ${callId}`,
        };
      if (
        theirs.seq !== mine.seq ||
        theirs.kind !== mine.kind ||
        theirs.name !== mine.name ||
        theirs.fingerprint !== mine.fingerprint
      )
        return {
          ...at,
          kind: "fork-mismatch",
          detail: `${named}, but the fork's call is seq ${mine.seq} ${mine.kind} "${mine.name}" (fingerprint ${mine.fingerprint.slice(0, 12)}) and the source's is seq ${theirs.seq} ${theirs.kind} "${theirs.name}" (fingerprint ${theirs.fingerprint.slice(0, 12)})`,
        };
    }
    return null;
  }

  /**
   * The findings of sources that are gone, but for runs retention removed on purpose: `pruned` says
   * so for a run id. Decided here, at the end, since a source is often looked up after the
   * `retention.pruned` of its run was read (the same page, or an earlier one).
   */
  finish(pruned: (runId: string) => boolean): AuditFinding[] {
    const unpointed = [...this.forks.values()].map(
      (fork): AuditFinding => ({
        streamId: fork.streamId,
        version: fork.version,
        position: fork.position,
        kind: "fork-mismatch",
        detail: `run.forked lists seq(s) ${[...fork.unpointed].join(", ")} as reused, but no outcome of the fork points to its source for them`,
      }),
    );
    return [
      ...[...this.missing].filter(([runId]) => !pruned(runId)).flatMap(([, findings]) => findings),
      ...unpointed,
    ];
  }
}
