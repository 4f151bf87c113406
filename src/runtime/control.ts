import * as Schema from "effect/Schema";
import { type AnyEvent, RunId, runStreamId } from "../events/index.js";
import {
  contextOf,
  ENDING_STATUSES,
  foldRun,
  type RunFold,
  type RunStatus,
  statusOf,
} from "../machines/index.js";
import type { EngineCore } from "./core.js";
import { decide } from "./decide.js";
import { RunWriter } from "./dispatch.js";
import { RunNotFound, StaleDecision, TransitionRejected, WrongExpectedVersion } from "./errors.js";
import { prunedResult, type RunResult } from "./execute.js";
import { handled } from "./handled.js";
import { decodeInput } from "./input.js";
import { recoverRun } from "./recoveryPass.js";

/** Who asks, and why (a note, masked like every payload). */
export interface ControlRequest {
  readonly by: string;
  readonly note?: string;
  /**
   * The stream version the person looked at (a bulk action, decision 0081): a run that moved on
   * since is refused (`accepted: false`, nothing written) rather than changed. Absent: as it is now.
   */
  readonly basedOnVersion?: number;
}

/**
 * What became of a cancel, pause or resume. `accepted: false` changed nothing (the run had ended,
 * was already being cancelled, was not paused, …) and `message` says why; `status` is where the run
 * stands: a run status, or `cancel-requested` / `pause-requested` while its owner carries it out.
 */
export interface ControlOutcome {
  readonly accepted: boolean;
  readonly runId: string;
  readonly status: RunStatus | "cancel-requested" | "pause-requested" | "pruned";
  readonly message: string;
  /** Refused because the run moved on since the `basedOnVersion` asked with. */
  readonly stale?: true;
}

/** The engine's side of cancel, pause and resume. */
export interface ControlCore extends EngineCore {
  /** Fold control requests into the live execution of `runId` here now, if there is one. */
  absorbControl(runId: string): Promise<void>;
  /** Continue a run that was just resumed: here when this runtime has its agent, else by recovery elsewhere. */
  continueRun(runId: string, fold: RunFold): Promise<{ readonly result: Promise<RunResult> }>;
}

const Person = Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || "say who asks (--by NAME)"));
const ControlRequestSchema = Schema.Struct({
  by: Person,
  note: Schema.optional(Schema.String),
  basedOnVersion: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
});

/** A run that moved on since the version the person looked at: refused, nothing written. */
const movedOn = (runId: string, fold: RunFold, basedOn: number | undefined): ControlOutcome | null => {
  if (basedOn === undefined) return null;
  const current = contextOf(fold).version;
  if (current === basedOn) return null;
  return {
    accepted: false,
    runId,
    status: statusOf(fold) as ControlOutcome["status"],
    stale: true,
    message: `run ${runId} changed since you looked at it (version ${basedOn}; it is at version ${current} now, ${statusOf(fold)}); nothing was written: look at it again`,
  };
};

const load = async (core: EngineCore, runId: string): Promise<RunFold | null> => {
  const events = await core.journal.readStream(runStreamId(runId));
  if (events.length > 0) return foldRun(events.map((e) => e.event));
  if (await prunedResult(core.journal, runId)) return null;
  throw new RunNotFound({ runId });
};

const prunedOutcome = (runId: string, what: string): ControlOutcome => ({
  accepted: false,
  runId,
  status: "pruned",
  message: `run ${runId} already ended and was removed by retention; nothing to ${what}`,
});

/**
 * Append events to a run another process may own: no fence, the version read decides; a run that
 * moved meanwhile is read again and `build` asked again (null: nothing to append any more).
 */
const appendUnowned = async (
  core: EngineCore,
  runId: string,
  build: (fold: RunFold) => ReadonlyArray<AnyEvent> | ControlOutcome,
  first: RunFold,
  basedOn?: number,
): Promise<{ readonly fold: RunFold } | ControlOutcome> => {
  let fold = first;
  for (let attempt = 0; ; attempt++) {
    const events = movedOn(runId, fold, basedOn) ?? build(fold);
    if (!Array.isArray(events)) return events as ControlOutcome;
    const writer = new RunWriter(core.journal, runId, fold, contextOf(fold).machine);
    // Checked against the version the caller looked at: a stream that moved on (a signal) refuses
    // the write; read again, `movedOn` reports it stale, nothing written.
    writer.strict = basedOn !== undefined;
    try {
      await writer.append(events as ReadonlyArray<AnyEvent>);
      return { fold: writer.fold };
    } catch (error) {
      // Another request won the version (two cancels, a cancel and a pause): the writer folded it
      // in and the machine refused this one on top of it. Read again: `build` gives the refusal.
      if (!(error instanceof WrongExpectedVersion || error instanceof TransitionRejected) || attempt >= 20)
        throw error;
      const again = await load(core, runId);
      if (!again) return prunedOutcome(runId, "change");
      fold = again;
    }
  }
};

/**
 * `runtime.cancel` (decision 0043): a terminal run is a no-op that says so; a held run takes the
 * `stop` decision; a paused run is cancelled at once; a running or interrupted run records
 * `run.cancel-requested`, which its owner learns (its next append, or its watch of the stream) —
 * or, when no live worker owns it, this runtime claims it and carries the cancel out itself.
 */
export const cancelRun = async (
  core: ControlCore,
  runId: string,
  raw: ControlRequest,
): Promise<ControlOutcome> => {
  decodeInput(RunId, runId, "runId");
  const request = decodeInput(ControlRequestSchema, raw, "cancel request");
  const by = core.masker.maskString(request.by.trim());
  const note = core.masker.maskString((request.note ?? "").trim());
  // A run that became held between the read and the request is cancelled as a held run is: the
  // stop decision (decision 0043), read again rather than refused ("cancel it again") to the caller.
  let outcome = await cancelOnce(core, runId, by, note, request.basedOnVersion);
  for (let again = 0; again < HELD_RETRIES && !outcome.accepted && outcome.status === "held"; again++)
    outcome = await cancelOnce(core, runId, by, note, request.basedOnVersion);
  return outcome;
};

/** How often a cancel that met a run just held is tried again before the refusal is returned. */
const HELD_RETRIES = 3;

const cancelOnce = async (
  core: ControlCore,
  runId: string,
  by: string,
  note: string,
  basedOn: number | undefined,
): Promise<ControlOutcome> => {
  let fold = await load(core, runId);
  if (!fold) return prunedOutcome(runId, "cancel");
  if (statusOf(fold) === "held" && core.isLive(runId)) {
    // Just held by its execution here, which is releasing it: once released, the stop decision.
    await core.wait(runId).catch(() => undefined);
    fold = await load(core, runId);
    if (!fold) return prunedOutcome(runId, "cancel");
  }
  const moved = movedOn(runId, fold, basedOn);
  if (moved) return moved;
  if (statusOf(fold) === "held" && !core.isLive(runId)) return stopHeld(core, runId, fold, by, note, basedOn);
  const appended = await appendUnowned(
    core,
    runId,
    (current): ReadonlyArray<AnyEvent> | ControlOutcome => {
      const status = statusOf(current);
      if (ENDING_STATUSES.has(status))
        return {
          accepted: false,
          runId,
          status,
          message: `run ${runId} already ended (${status}); there is nothing to cancel`,
        };
      if (status === "held")
        return {
          accepted: false,
          runId,
          status,
          message: `run ${runId} became held meanwhile and its execution here has not let go of it; cancel it again to stop it`,
        };
      if (contextOf(current).cancelRequested)
        return {
          accepted: false,
          runId,
          status: "cancel-requested",
          message: `run ${runId} is already being cancelled (asked by ${contextOf(current).cancelRequested!.by})`,
        };
      const requested: AnyEvent = { type: "run.cancel-requested", runId, by, note };
      // A paused or waiting run has no execution and nothing in doubt: it ends in the same commit
      // (a waiting run's row leaves the due index with it, decision 0050).
      return status === "paused" || status === "waiting"
        ? [requested, { type: "run.cancelled", runId, by, note }]
        : [requested];
    },
    fold,
    basedOn,
  );
  if (!("fold" in appended)) {
    // Asked already, but its owner is gone (it died, or its execution ended without carrying the
    // cancel out): a repeated cancel carries it out rather than leave the run to the next recovery.
    if (appended.status !== "cancel-requested" || core.isLive(runId)) return appended;
    const current = await load(core, runId);
    if (!current) return appended;
    const carried = await carryOut(core, runId, current, "cancel");
    return carried.status === "cancel-requested" ? appended : carried;
  }
  // A paused run ended in that commit: its chat's next queued input is admitted (decision 0045).
  if (statusOf(appended.fold) === "cancelled") await core.runEnded(contextOf(appended.fold).chatId);
  return carryOut(core, runId, appended.fold, "cancel");
};

/** `runtime.pause` (decision 0044): the run parks before its next call; in-flight calls settle. */
export const pauseRun = async (
  core: ControlCore,
  runId: string,
  raw: ControlRequest,
): Promise<ControlOutcome> => {
  decodeInput(RunId, runId, "runId");
  const request = decodeInput(ControlRequestSchema, raw, "pause request");
  const by = core.masker.maskString(request.by.trim());
  const note = core.masker.maskString((request.note ?? "").trim());
  const fold = await load(core, runId);
  if (!fold) return prunedOutcome(runId, "pause");
  const appended = await appendUnowned(
    core,
    runId,
    (current): ReadonlyArray<AnyEvent> | ControlOutcome => {
      const status = statusOf(current);
      const { cancelRequested, pauseRequested } = contextOf(current);
      const refuse = (message: string, as: ControlOutcome["status"] = status): ControlOutcome => ({
        accepted: false,
        runId,
        status: as,
        message,
      });
      if (ENDING_STATUSES.has(status))
        return refuse(`run ${runId} already ended (${status}); there is nothing to pause`);
      if (status === "held")
        return refuse(
          `run ${runId} is held: it runs nothing until a person decides (holdfast show ${runId}); there is nothing to pause`,
        );
      if (status === "paused")
        return refuse(`run ${runId} is already paused; resume it with holdfast resume`);
      if (cancelRequested)
        return refuse(`run ${runId} is being cancelled; it cannot be paused`, "cancel-requested");
      if (pauseRequested)
        return refuse(
          `run ${runId} is already being paused (asked by ${pauseRequested.by})`,
          "pause-requested",
        );
      return [{ type: "run.pause-requested", runId, by, note }];
    },
    fold,
    request.basedOnVersion,
  );
  if (!("fold" in appended)) return appended;
  // Paused while waiting: it keeps waiting, and parks paused once woken (decision 0051).
  const waiting = contextOf(appended.fold).waiting;
  if (statusOf(appended.fold) === "waiting" && waiting)
    return {
      accepted: true,
      runId,
      status: "pause-requested",
      message: `pause of run ${runId} recorded; it keeps waiting (${waiting.wait === "signal" ? `for signal "${waiting.name ?? ""}"${waiting.dueAt ? ` or until ${waiting.dueAt}` : ""}` : waiting.wait === "approval" ? `for approval of ${waiting.callId}` : `until ${waiting.dueAt}`}), then parks paused instead of going on`,
    };
  return carryOut(core, runId, appended.fold, "pause");
};

/** `runtime.resume`: a paused run continues, re-executed from the journal (here or on any worker). */
export const resumeRun = async (
  core: ControlCore,
  runId: string,
  raw: ControlRequest,
): Promise<ControlOutcome & { readonly result: Promise<RunResult> }> => {
  decodeInput(RunId, runId, "runId");
  const request = decodeInput(ControlRequestSchema, raw, "resume request");
  const by = core.masker.maskString(request.by.trim());
  const fold = await load(core, runId);
  const idle = handled(core.wait(runId));
  if (!fold) return { ...prunedOutcome(runId, "resume"), result: idle };
  const appended = await appendUnowned(
    core,
    runId,
    (current): ReadonlyArray<AnyEvent> | ControlOutcome => {
      const status = statusOf(current);
      if (status !== "paused")
        return {
          accepted: false,
          runId,
          status,
          message: `run ${runId} is ${status}, not paused; only a paused run can be resumed${status === "held" ? ` (a held run takes a decision: holdfast decide ${runId})` : ""}`,
        };
      return [{ type: "run.resumed", runId, by }];
    },
    fold,
    request.basedOnVersion,
  );
  if (!("fold" in appended)) return { ...appended, result: idle };
  const { result } = await core.continueRun(runId, appended.fold);
  return { accepted: true, runId, status: "running", message: `run ${runId} resumed by ${by}`, result };
};

/** After a request is recorded: tell the execution here, or finish the job for an owner that is gone. */
const carryOut = async (
  core: ControlCore,
  runId: string,
  fold: RunFold,
  what: "cancel" | "pause",
): Promise<ControlOutcome> => {
  const status = statusOf(fold);
  if (status === "cancelled")
    return {
      accepted: true,
      runId,
      status,
      message: `run ${runId} was parked (paused or waiting) and is now cancelled`,
    };
  const requested = what === "cancel" ? "cancel-requested" : "pause-requested";
  const pending: ControlOutcome = {
    accepted: true,
    runId,
    status: requested,
    message: `${what} of run ${runId} recorded; its owner stops it before its next call`,
  };
  if (core.isLive(runId)) {
    await core.absorbControl(runId);
    return pending;
  }
  // No execution here: a live worker elsewhere learns it; a run with no live owner is taken now.
  if (!(await recoverRun(core, runId))) return pending;
  const after = await load(core, runId);
  if (!after) return pending;
  const now = statusOf(after);
  if (now === "cancelled") await core.runEnded(contextOf(after).chatId);
  if (now === "cancelled" || now === "paused")
    return { accepted: true, runId, status: now, message: `run ${runId} is ${now}` };
  if (now === "held")
    return {
      accepted: true,
      runId,
      status: now,
      message: `run ${runId} is held: a call is in doubt (holdfast show ${runId}); decide it, or stop the run`,
    };
  return pending;
};

/** Cancelling a held run is the `stop` decision, made on the version read (retried once if it moved). */
const stopHeld = async (
  core: ControlCore,
  runId: string,
  fold: RunFold,
  by: string,
  note: string,
  basedOn: number | undefined,
): Promise<ControlOutcome> => {
  let version = contextOf(fold).version;
  for (let attempt = 0; ; attempt++) {
    try {
      const decided = await decide(core, runId, {
        basedOnVersion: version,
        decidedBy: by,
        decision: "stop",
        note: note || "cancelled",
      });
      await decided.result;
      return {
        accepted: true,
        runId,
        status: "stopped",
        message: `run ${runId} was held: stopped by decision`,
      };
    } catch (error) {
      if (!(error instanceof StaleDecision) || attempt >= 3) throw error;
      const again = await load(core, runId);
      // Looked at on one version: a run that moved on is the person's to look at again.
      if (basedOn !== undefined && again)
        return (
          movedOn(runId, again, basedOn) ?? cancelRun(core, runId, { by, note, basedOnVersion: basedOn })
        );
      if (!again || statusOf(again) !== "held") return cancelRun(core, runId, { by, note });
      version = contextOf(again).version;
    }
  }
};
