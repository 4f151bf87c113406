import { digestOf, type RecordedEvent } from "../../events/index.js";
import {
  emptyFold,
  type RunFold,
  runMachineFor,
  statusOf,
  step,
  TransitionRejected,
} from "../../machines/index.js";
import type { Admission } from "../Journal.js";
import type { AuditFinding, Findings } from "./findings.js";
import { RunLaws } from "./laws.js";

/** What the audit keeps of one run while it reads the log. */
export interface RunTrack {
  readonly runId: string;
  /** The machine fold; null before run.admitted, or when the machine version is unknown. */
  fold: RunFold | null;
  machineKnown: boolean;
  readonly laws: RunLaws;
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

const FINISHED = new Set(["completed", "failed", "stopped"]);

/**
 * The checks of run streams: every run folds through its recorded machine version, the laws
 * across its events hold, its checkpoints and results match their digests, its admission is the
 * journal's, and the active-run guard agrees with its status.
 */
export class RunChecks {
  private count = 0;
  private readonly pendingAdmissions: AdmissionCheck[] = [];

  constructor(private readonly findings: Findings) {}

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
      run = { runId: recorded.streamId.slice(4), fold: null, machineKnown: true, laws: new RunLaws() };
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
      if (run.fold === null && run.machineKnown) {
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
    const law = run.laws.check(event);
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
    if (run.fold === null) {
      this.findings.add({
        ...at,
        kind: "transition-rejected",
        detail: "a run stream must start with run.admitted",
      });
      return;
    }
    try {
      run.fold = step(run.fold, event);
    } catch (error) {
      if (!(error instanceof TransitionRejected)) throw error;
      this.findings.add({
        ...at,
        kind: "transition-rejected",
        detail: `${event.type} is not accepted in state "${error.state}" of ${run.fold.snapshot.context.machine}`,
      });
    }
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

  /** Runs whose active-run guard disagrees with their fold (the driver confirms each). */
  guardMismatches(
    streams: Iterable<RunStream>,
    activeRunIds: ReadonlySet<string>,
    pruned: ReadonlySet<string>,
  ): Array<AuditFinding & { readonly runId: string }> {
    const found: Array<AuditFinding & { readonly runId: string }> = [];
    const known = new Set<string>();
    for (const s of streams) {
      if (s.sealed && s.streamId.startsWith("run-")) known.add(s.streamId.slice("run-".length));
      const run = s.run;
      if (!run || s.sealed) continue;
      known.add(run.runId);
      if (!run.fold) continue;
      const status = statusOf(run.fold);
      const finished = FINISHED.has(status);
      const active = activeRunIds.has(run.runId);
      if (finished === !active) continue;
      found.push({
        runId: run.runId,
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
        detail: pruned.has(`run-${runId}`)
          ? "retention removed this run, but the active-run guard still marks it active"
          : "the active-run guard marks this run active, but the log has no such run",
      });
    }
    return found;
  }
}
