import { digestOf, type RecordedEvent } from "../../events/index.js";
import {
  emptyFold,
  type RunFold,
  type RunStatus,
  runMachineFor,
  statusOf,
  step,
  TransitionRejected,
} from "../../machines/index.js";
import type { Admission } from "../Journal.js";
import type { AuditFinding, Breach, Findings } from "./findings.js";
import { RunLaws } from "./laws.js";
import type { AuditSpill } from "./spill.js";

/** Where a run that ended stands: all that a later event of it needs from the fold. */
interface Ended {
  readonly status: RunStatus;
  readonly machine: string;
  /** The machine context's version (a late `conflict.recorded` moves it on). */
  version: number;
}

/**
 * What the audit keeps of one run while it reads the log. A run that ended keeps neither its fold
 * nor its call records in memory: its status, with the call records set aside in the spill.
 */
export interface RunTrack {
  /** The machine fold; null before run.admitted, when the machine version is unknown, or once ended. */
  fold: RunFold | null;
  machineKnown: boolean;
  /** The call records; null once the run ended (they wait in the spill). */
  laws: RunLaws | null;
  ended: Ended | null;
}

/** An admission the journal must hold for a `run.admitted` (the driver looks it up). */
export interface AdmissionCheck {
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  readonly digest: string;
  readonly streamId: string;
  readonly version: number;
}

/** A run stream as the guard check sees it. */
export interface RunStream {
  readonly streamId: string;
  readonly version: number;
  /** Read without its key: the run is known, its status is not. */
  readonly sealed: boolean;
  readonly run: RunTrack | null;
}

/** The spill space of the call records of runs that ended, by stream id. */
const LAWS = "laws";

const FINISHED: ReadonlySet<RunStatus> = new Set(["completed", "failed", "stopped", "cancelled"]);

/** A run's status as folded so far; null when it has none (no `run.admitted`, unknown machine). */
const statusOfRun = (run: RunTrack): RunStatus | null =>
  run.ended?.status ?? (run.fold ? statusOf(run.fold) : null);

/**
 * A fold standing where an ended run stopped, for the machine to judge a later event of it: the
 * run's status with a context holding its id and version and no calls. No state after the end
 * takes a call event, so the verdict is the one the whole fold would give.
 */
const foldAtEnd = (runId: string, ended: Ended): RunFold => {
  const empty = emptyFold(ended.machine);
  const snapshot = empty.machine.resolveState({
    value: ended.status,
    context: { ...empty.snapshot.context, runId, version: ended.version },
  });
  return { snapshot, machine: empty.machine };
};

/**
 * The checks of run streams: every run folds through its recorded machine version, the laws
 * across its events hold, its checkpoints and results match their digests, its admission is the
 * journal's, and the active-run guard agrees with its status.
 */
export class RunChecks {
  private count = 0;
  private readonly pendingAdmissions: AdmissionCheck[] = [];

  constructor(
    private readonly findings: Findings,
    private readonly spill: AuditSpill,
  ) {}

  /** Runs seen. */
  get runs(): number {
    return this.count;
  }

  /** Check one event of a run stream; `stream.run` is the run's track (made on its first event). */
  check(recorded: RecordedEvent, stream: { run: RunTrack | null }): void {
    const { event } = recorded;
    const at = { streamId: recorded.streamId, version: recorded.version, position: recorded.position };
    let run = stream.run;
    if (!run) {
      run = { fold: null, machineKnown: true, laws: new RunLaws(), ended: null };
      stream.run = run;
      this.count += 1;
    }
    if (event.type === "run.admitted") {
      this.pendingAdmissions.push({
        runId: event.runId,
        chatId: event.chatId,
        inputId: event.inputId,
        digest: event.inputDigest,
        streamId: recorded.streamId,
        version: recorded.version,
      });
      if (run.fold === null && run.ended === null && run.machineKnown) {
        if (runMachineFor(event.machine)) run.fold = emptyFold(event.machine);
        else {
          run.machineKnown = false;
          this.findings.add({
            ...at,
            kind: "unknown-machine",
            detail: `machine version "${event.machine}" is not in the registry; this holdfast cannot fold the run`,
          });
        }
      }
    }
    const law = this.checkLaws(run, recorded);
    if (law) this.findings.add({ ...at, ...law });
    if (event.type === "checkpoint.saved" && digestOf(event.state) !== event.digest)
      this.findings.add({
        ...at,
        kind: "checkpoint-mismatch",
        detail: "the checkpoint does not match its digest",
      });
    const result =
      event.type === "call.completed"
        ? { value: event.result, digest: event.resultDigest }
        : event.type === "call.reconciled" && event.resultDigest !== undefined
          ? { value: event.result ?? null, digest: event.resultDigest }
          : null;
    // A changed row is already a hash-mismatch; the contents check speaks of rows that chain.
    if (result && !this.findings.rowHasFinding && digestOf(result.value) !== result.digest)
      this.findings.add({
        ...at,
        kind: "result-mismatch",
        detail: "the recorded result does not match its digest",
      });
    if (law || !run.machineKnown) return;
    const fold = run.ended ? foldAtEnd(recorded.streamId.slice("run-".length), run.ended) : run.fold;
    if (fold === null) {
      this.findings.add({
        ...at,
        kind: "transition-rejected",
        detail: "a run stream must start with run.admitted",
      });
      return;
    }
    let next: RunFold;
    try {
      next = step(fold, event);
    } catch (error) {
      if (!(error instanceof TransitionRejected)) throw error;
      this.findings.add({
        ...at,
        kind: "transition-rejected",
        detail: `${event.type} is not accepted in state "${error.state}" of ${fold.snapshot.context.machine}`,
      });
      return;
    }
    if (run.ended) {
      run.ended.version = next.snapshot.context.version;
      return;
    }
    const status = statusOf(next);
    if (!FINISHED.has(status)) {
      run.fold = next;
      return;
    }
    // The run ended: a later event of it needs only its status here, and its call records.
    run.ended = { status, machine: next.snapshot.context.machine, version: next.snapshot.context.version };
    run.fold = null;
    if (run.laws) this.spill.put(LAWS, recorded.streamId, run.laws.save());
    run.laws = null;
  }

  /** The laws for one event; an ended run's call records come back from the spill if it needs them. */
  private checkLaws(run: RunTrack, recorded: RecordedEvent): Breach | null {
    if (run.laws) return run.laws.check(recorded.event, recorded.recordedAt);
    if (!RunLaws.concerns(recorded.event.type)) return null;
    const saved = this.spill.get(LAWS, recorded.streamId);
    const laws = saved === undefined ? new RunLaws() : RunLaws.restore(saved);
    const law = laws.check(recorded.event, recorded.recordedAt);
    this.spill.put(LAWS, recorded.streamId, laws.save());
    return law;
  }

  /** How many of these runs have their fold, and their call records, in memory. */
  retained(runs: Iterable<RunTrack>): { readonly folds: number; readonly callRecords: number } {
    let folds = 0;
    let callRecords = 0;
    for (const run of runs) {
      if (run.fold) folds += 1;
      if (run.laws) callRecords += 1;
    }
    return { folds, callRecords };
  }

  /** Admissions to look up in the journal, collected since the last call. */
  takeAdmissionChecks(): AdmissionCheck[] {
    return this.pendingAdmissions.splice(0);
  }

  /** The journal's admission row for a check (null: none). */
  admissionFound(check: AdmissionCheck, admission: Admission | null): void {
    const at = { streamId: check.streamId, version: check.version };
    const of = `input ${check.inputId} of chat ${check.chatId}`;
    if (!admission)
      this.findings.add({ ...at, kind: "admission-mismatch", detail: `no admission is recorded for ${of}` });
    else if (admission.runId !== check.runId)
      this.findings.add({
        ...at,
        kind: "admission-mismatch",
        detail: `${of} was admitted as run ${admission.runId}: this is a second run.admitted for it`,
      });
    else if (admission.digest !== check.digest)
      this.findings.add({
        ...at,
        kind: "admission-mismatch",
        detail: `the admission of ${of} has another digest`,
      });
  }

  /**
   * Runs whose active-run guard disagrees with their status (the driver confirms each). `pruned`:
   * whether retention recorded removing a stream.
   */
  guardMismatches(
    streams: Iterable<RunStream>,
    activeRunIds: ReadonlySet<string>,
    pruned: (streamId: string) => boolean,
  ): Array<AuditFinding & { readonly runId: string }> {
    const found: Array<AuditFinding & { readonly runId: string }> = [];
    const known = new Set<string>();
    for (const s of streams) {
      if (!s.streamId.startsWith("run-")) continue;
      const runId = s.streamId.slice("run-".length);
      // A run read without its key: known, but its status is not.
      if (s.sealed) known.add(runId);
      const run = s.run;
      if (!run || s.sealed) continue;
      known.add(runId);
      const status = statusOfRun(run);
      if (status === null) continue;
      const finished = FINISHED.has(status);
      const active = activeRunIds.has(runId);
      if (finished === !active) continue;
      found.push({
        runId,
        streamId: s.streamId,
        version: s.version,
        kind: "guard-mismatch",
        detail: finished
          ? `the run is ${status} but the active-run guard still marks it active (its chat refuses new input)`
          : `the run is ${status} but the active-run guard marks it finished (its chat would accept new input)`,
      });
    }
    for (const runId of activeRunIds) {
      if (known.has(runId)) continue;
      found.push({
        runId,
        streamId: `run-${runId}`,
        version: null,
        kind: "guard-mismatch",
        detail: pruned(`run-${runId}`)
          ? "retention removed this run, but the active-run guard still marks it active"
          : "the active-run guard marks this run active, but the log has no such run",
      });
    }
    return found;
  }
}
