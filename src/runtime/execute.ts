import type { AnyEvent, ErrorInfo, HoldReason, Masker, RecordedEvent } from "../events/index.js";
import {
  blockingCalls,
  contextOf,
  ENDING_STATUSES,
  foldRun,
  openCalls,
  type RunFold,
  type RunStatus,
  statusOf,
} from "../machines/index.js";
import { errorInfo } from "./attempt.js";
import type { AnyAgentDef, AnyToolDef } from "./define.js";
import type { RunWriter } from "./dispatch.js";
import {
  CallFailed,
  FencedOut,
  InvalidInput,
  JournalUnavailable,
  LeaseLost,
  RunMovedOn,
  WrongExpectedVersion,
} from "./errors.js";
import type { Journal } from "./Journal.js";
import { storedCopy, storedDigest } from "./json.js";
import type { LeaseRenewal } from "./ownership.js";
import { TurnImpl } from "./turn.js";

/** How a run ended, or where it stopped. */
export type RunResult =
  | { readonly status: "completed"; readonly runId: string; readonly output: unknown }
  | { readonly status: "held"; readonly runId: string; readonly reasons: ReadonlyArray<HoldReason> }
  | { readonly status: "failed"; readonly runId: string; readonly error: ErrorInfo }
  | { readonly status: "stopped"; readonly runId: string }
  /** Ended by `runtime.cancel` (decision 0043): who asked, and why. */
  | { readonly status: "cancelled"; readonly runId: string; readonly by: string; readonly note: string }
  /** Parked by `runtime.pause` (decision 0044) until `runtime.resume`. */
  | { readonly status: "paused"; readonly runId: string }
  /**
   * Waiting (`turn.sleep`, decision 0050): no execution holds it; it is woken at `wakesAt` by any
   * worker and re-executed from the journal. `runtime.wait` then gives how it goes on.
   */
  | { readonly status: "waiting"; readonly runId: string; readonly wait: "timer"; readonly wakesAt: string }
  /**
   * Waiting for the signal `name` (`turn.waitFor`, decision 0054): woken when it is recorded
   * (`runtime.signal`), or at `wakesAt` when it times out (null: no timeout).
   */
  | {
      readonly status: "waiting";
      readonly runId: string;
      readonly wait: "signal";
      readonly name: string;
      readonly wakesAt: string | null;
    }
  /**
   * Waiting for a person to approve or deny the tool call `callId` (decision 0057): woken when the
   * decision is recorded (`runtime.approve` / `runtime.deny`); it never times out.
   */
  | {
      readonly status: "waiting";
      readonly runId: string;
      readonly wait: "approval";
      readonly callId: string;
      readonly wakesAt: null;
    }
  /**
   * Finished long ago and removed by retention: its admission remains (law 6), so the same input
   * is still this run. `finalStatus` is how it ended; `outputDigest` the digest of its output.
   * Also how an execution ends whose run was taken over, ended and pruned while one of its calls
   * ran: that call's outcome is kept as `outcome.orphaned` in the system stream.
   */
  | {
      readonly status: "pruned";
      readonly runId: string;
      readonly finalStatus: string;
      readonly outputDigest: string | null;
      readonly prunedAt: string;
    }
  /** Active, but executed by another worker or waiting for recovery; watch the journal. */
  | { readonly status: "elsewhere"; readonly runId: string; readonly state: string };

/** What one execution of an agent function needs. */
export interface ExecuteDeps {
  readonly journal: Journal;
  readonly masker: Masker;
  readonly tools: ReadonlyMap<string, AnyToolDef>;
  readonly replayAllowed: (tool: AnyToolDef) => boolean;
  readonly mayStartEffect: (runId: string) => boolean;
  /** Renew the run's lease now, when an effect would be refused for want of margin. */
  readonly renewLease: (runId: string) => Promise<LeaseRenewal>;
  readonly runChild: (agent: string, input: unknown, inputId: string) => Promise<unknown>;
  /** A run of the chat ended: its queue's next input may be admitted (never throws). */
  readonly runEnded: (chatId: string) => Promise<void>;
  /** How long a cancelled run waits for its in-flight calls to settle before it is ended or held. */
  readonly cancelGraceMs: number;
  /** Watch the run's stream for control requests while it executes; returns the unwatch. */
  readonly watch: (writer: RunWriter) => () => void;
}

export interface Execution {
  readonly agent: AnyAgentDef;
  readonly writer: RunWriter;
  readonly chatId: string;
  readonly inputId: string;
  readonly input: unknown;
  /** The run's events so far (empty for a new run): recorded outcomes are served from them. */
  readonly history: ReadonlyArray<RecordedEvent>;
}

/**
 * Execute (or re-execute) a run's agent function through the turn API, and end the run the way the
 * journal says it ended. The terminal event waits until every call the turn started has settled
 * (DESIGN §6: ownership lasts from claim to settle), and a run never completes or fails with a call
 * open: what cannot be closed is held for a person.
 */
export const execute = async (deps: ExecuteDeps, run: Execution): Promise<RunResult> => {
  const result = await executeOnce(deps, run);
  // The one place a run's end admits its chat's next queued input (decision 0045): every ending
  // result, the early ones (a request carried out before the agent ran) included.
  if (ENDING_STATUSES.has(result.status as RunStatus)) await deps.runEnded(run.chatId);
  return result;
};

const executeOnce = async (deps: ExecuteDeps, run: Execution): Promise<RunResult> => {
  const { writer } = run;
  const runId = writer.runId;
  // Asked to cancel or pause before this execution began (a resume after a hold, a re-execution):
  // the agent is not run again, the request is carried out at once.
  const asked = contextOf(writer.fold);
  if (statusOf(writer.fold) === "running" && (asked.cancelRequested || asked.pauseRequested))
    return settleQuietly(runId, () => finishControl(writer));
  const turn = new TurnImpl({
    writer,
    chatId: run.chatId,
    inputId: run.inputId,
    fingerprintKey: deps.journal.fingerprintKey,
    masker: deps.masker,
    tools: deps.tools,
    history: run.history,
    documents: { journal: deps.journal, masker: deps.masker },
    mayStartEffect: () => deps.mayStartEffect(runId),
    renewLease: () => deps.renewLease(runId),
    replayAllowed: deps.replayAllowed,
    runChild: deps.runChild,
  });
  const unwatch = deps.watch(writer);
  // Once a cancel is known, the agent and its calls have the grace period to settle; a call that
  // ignores its signal is then left in doubt and the run is held for it (`cancelled-in-doubt`).
  let graceTimer: ReturnType<typeof setTimeout> | undefined;
  let executing = true;
  const graceOver = turn.cancelled.then(
    () =>
      new Promise<"grace-over">((resolve) => {
        if (executing) graceTimer = setTimeout(resolve, deps.cancelGraceMs, "grace-over");
      }),
  );
  let ended: { readonly output: unknown } | { readonly error: unknown };
  try {
    const agentRun = (async () => {
      try {
        return { output: await run.agent.run(turn, run.input) };
      } catch (error) {
        return { error };
      }
    })();
    const first = await Promise.race([agentRun, graceOver]);
    ended = first === "grace-over" ? { error: turn.signal.reason } : first;
    await Promise.race([turn.settle(), graceOver]);
  } finally {
    // The grace timer holds the execution: it goes with it.
    executing = false;
    clearTimeout(graceTimer);
    unwatch();
  }
  if (turn.runWasPruned)
    return (
      (await prunedResult(deps.journal, runId)) ?? elsewhere(runId, "the run is no longer in the journal")
    );
  if (turn.ownershipWasLost) {
    // The journal refused a write this execution needed (an outcome, an intent of unknown fate): it
    // stopped writing, and the run's result rejects with the reason; `wait` reads the run as it is
    // (decisions 0069, 0070). Recovery resumes it, or holds it for the call in doubt.
    if ("error" in ended && ended.error instanceof JournalUnavailable) {
      const { location, hint, written } = ended.error;
      throw new JournalUnavailable({
        location,
        reason: turn.lostBecause ?? ended.error.reason,
        hint,
        ...(written ? { written } : {}),
      });
    }
    return elsewhere(runId, turn.lostBecause ?? "this worker lost the run to another owner");
  }
  try {
    const status = statusOf(writer.fold);
    const { cancelRequested, pauseRequested } = contextOf(writer.fold);
    if (status === "running" && (cancelRequested || (pauseRequested && turn.pauseRefused)))
      return await finishControl(writer);
    try {
      return await finish(deps.masker, writer, ended);
    } catch (error) {
      // A cancel request arrived while the end was appended: the run ends cancelled instead.
      if (isRejected(error) && contextOf(writer.fold).cancelRequested) return await finishControl(writer);
      throw error;
    }
  } catch (error) {
    // Not this worker's run any more: write nothing; the owner (or the next recovery) goes on.
    if (error instanceof FencedOut || error instanceof WrongExpectedVersion)
      return elsewhere(runId, error.message);
    throw error;
  }
};

const elsewhere = (runId: string, state: string): RunResult => ({ status: "elsewhere", runId, state });

const isRejected = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "TransitionRejected";

const settleQuietly = async (runId: string, end: () => Promise<RunResult>): Promise<RunResult> => {
  try {
    return await end();
  } catch (error) {
    if (error instanceof FencedOut || error instanceof WrongExpectedVersion)
      return elsewhere(runId, error.message);
    throw error;
  }
};

/**
 * Carry out a cancel or pause request once the execution's calls settled (or the grace ran out):
 * `run.cancelled` / `run.paused` when nothing is in doubt; otherwise the run is held, each call in
 * doubt named — a cancel with `cancelled-in-doubt`, never forgotten (decisions 0043, 0044).
 */
export const finishControl = async (writer: RunWriter): Promise<RunResult> => {
  // The end is decided on the fold; a request from another process (a cancel meeting a pause) or a
  // call whose intent committed meanwhile (a cleanup after the grace) makes the machine refuse it.
  // The writer has folded in what moved the run: decide again on what the journal holds now.
  for (let attempt = 0; ; attempt++) {
    const version = contextOf(writer.fold).version;
    try {
      return await finishControlOnce(writer);
    } catch (error) {
      if (!isRejected(error) || attempt >= 20) throw error;
      if (contextOf(writer.fold).version === version) await writer.refresh();
    }
  }
};

const finishControlOnce = async (writer: RunWriter): Promise<RunResult> => {
  const runId = writer.runId;
  const context = contextOf(writer.fold);
  if (statusOf(writer.fold) !== "running") return resultFromFold(runId, writer.fold);
  const cancel = context.cancelRequested;
  // As recovery would: a model call declared replayable changes nothing outside, so an aborted
  // one is authorized rather than left in doubt (its late answer, if any, is kept as a conflict).
  const replayable = cancel
    ? blockingCalls(context).filter((call) => call.kind === "model" && call.disposition === "replay")
    : [];
  const authorized: AnyEvent[] = replayable.map((call) => ({
    type: "call.replay-authorized",
    runId,
    callId: call.callId,
    attempt: call.attempt,
    reason: "model-policy",
  }));
  const inDoubt = blockingCalls(context).filter((call) => !replayable.includes(call));
  if (inDoubt.length === 0) {
    if (cancel) {
      await writer.append([
        ...authorized,
        { type: "run.cancelled", runId, by: cancel.by, note: cancel.note },
      ]);
      return { status: "cancelled", runId, by: cancel.by, note: cancel.note };
    }
    await writer.append([{ type: "run.paused", runId }]);
    return { status: "paused", runId };
  }
  const asked = cancel ?? context.pauseRequested!;
  const reasons = inDoubt.map(
    (call): HoldReason => ({
      code: cancel ? "cancelled-in-doubt" : "in-doubt",
      callId: call.callId,
      detail: `${cancel ? "cancelled" : "paused"} by ${asked.by} while ${call.kind} "${call.name}" attempt ${call.attempt} had no recorded outcome (it did not settle within the grace period, or failed without proof that it did nothing); decide the call, or stop the run`,
    }),
  );
  if (authorized.length > 0) await writer.append(authorized);
  return hold(writer, [reasons[0]!, ...reasons.slice(1)]);
};

/** What became of a run retention removed: how it ended, as `pruned_runs` keeps it; null if never pruned. */
export const prunedResult = async (journal: Journal, runId: string): Promise<RunResult | null> => {
  const pruned = await journal.prunedRun(runId);
  if (!pruned) return null;
  return {
    status: "pruned",
    runId,
    finalStatus: pruned.status,
    outputDigest: pruned.outputDigest,
    prunedAt: pruned.prunedAt,
  };
};

const finish = async (
  masker: Masker,
  writer: RunWriter,
  ended: { readonly output: unknown } | { readonly error: unknown },
): Promise<RunResult> => {
  const runId = writer.runId;
  const status = statusOf(writer.fold);
  if (status !== "running") return resultFromFold(runId, writer.fold);
  if ("error" in ended) {
    const { error } = ended;
    if (error instanceof LeaseLost || error instanceof FencedOut || error instanceof RunMovedOn)
      return elsewhere(runId, error.message);
    // A version conflict on this run's own stream is holdfast's, never the agent's: another writer
    // (or a commit of this one it could not count) moved the run under this execution, and the
    // append that met it wrote nothing. Nothing is recorded: the claim is let go and the next
    // recovery re-executes the run from the journal (issue 35).
    if (error instanceof WrongExpectedVersion && error.streamId === writer.streamId)
      return elsewhere(runId, `the run moved under this execution (${error.message})`);
    // The journal refused a write (a full disk, an I/O error): the agent did not fail, the storage
    // did. Nothing is recorded; the run stays active for recovery, which resumes it or holds it for
    // the call whose outcome could not be written (decisions 0069, 0070): `runtime.wait` answers `elsewhere`, the run's result rejects with the reason.
    if (error instanceof JournalUnavailable) throw error;
    if (error instanceof CallFailed) {
      // A definite failure the agent did not handle: a person may grant a retry or stop the run.
      return hold(writer, [
        {
          code: "decision-needed",
          callId: error.callId,
          detail: `${error.name} failed definitely and the agent did not handle it: ${error.error.message}; grant a retry (holdfast retry ${runId} ${error.callId} --attempts 1) or stop the run`,
        },
      ]);
    }
    const info = errorInfo(masker, error);
    const open = openReasons(writer.fold, `the agent failed (${info.name}: ${info.message})`);
    if (open) return hold(writer, open);
    await writer.append([{ type: "run.failed", runId, error: info }]);
    return { status: "failed", runId, error: info };
  }
  let stored: unknown;
  try {
    stored = masker.mask(storedCopy(ended.output, `output of run ${runId}`));
  } catch (error) {
    // An output that cannot be stored ends the run as failed, never leaves it active for ever.
    const info = errorInfo(
      masker,
      error instanceof InvalidInput ? error : new InvalidInput({ what: "output", detail: String(error) }),
    );
    const open = openReasons(writer.fold, `the agent's output cannot be stored (${info.message})`);
    if (open) return hold(writer, open);
    await writer.append([{ type: "run.failed", runId, error: info }]);
    return { status: "failed", runId, error: info };
  }
  const open = openReasons(writer.fold, "the agent returned");
  if (open) return hold(writer, open);
  await writer.append([{ type: "run.completed", runId, output: stored, outputDigest: storedDigest(stored) }]);
  return { status: "completed", runId, output: stored };
};

/**
 * Calls still open once every call of the execution settled: authorized to run again (a replay, a
 * person's new attempt) but never reached, because the agent took another path or ended first.
 * Their outcome is unknown to the run, so it cannot end: a person decides.
 */
const openReasons = (fold: RunFold, what: string): [HoldReason, ...HoldReason[]] | null => {
  const reasons = openCalls(contextOf(fold)).map(
    (call): HoldReason => ({
      code: "decision-needed",
      callId: call.callId,
      detail: `${what} while ${call.kind} "${call.name}" (${call.callId}) was ${call.status === "authorized" ? "authorized to run again but not reached" : "without a recorded outcome"}; decide the call or stop the run`,
    }),
  );
  const [first, ...rest] = reasons;
  return first ? [first, ...rest] : null;
};

const hold = async (writer: RunWriter, reasons: [HoldReason, ...HoldReason[]]): Promise<RunResult> => {
  await writer.append([{ type: "run.held", runId: writer.runId, reasons }]);
  return { status: "held", runId: writer.runId, reasons };
};

export const resultFromFold = (runId: string, fold: RunFold): RunResult => {
  const status = statusOf(fold);
  switch (status) {
    case "held":
      return { status: "held", runId, reasons: contextOf(fold).heldReasons };
    case "stopped":
      return { status: "stopped", runId };
    case "cancelled": {
      const asked = contextOf(fold).cancelRequested;
      return { status: "cancelled", runId, by: asked?.by ?? "", note: asked?.note ?? "" };
    }
    case "paused":
      return { status: "paused", runId };
    case "waiting": {
      const waiting = contextOf(fold).waiting;
      if (waiting?.wait === "signal")
        return {
          status: "waiting",
          runId,
          wait: "signal",
          name: waiting.name ?? "",
          wakesAt: waiting.dueAt ?? null,
        };
      if (waiting?.wait === "approval")
        return { status: "waiting", runId, wait: "approval", callId: waiting.callId, wakesAt: null };
      return { status: "waiting", runId, wait: "timer", wakesAt: waiting?.dueAt ?? "" };
    }
    default:
      return elsewhere(runId, status);
  }
};

/** Read a finished (or waiting) run's result from its events. */
export const resultFromJournal = (runId: string, events: ReadonlyArray<RecordedEvent>): RunResult => {
  const fold = foldRun(events.map((e) => e.event));
  const status = statusOf(fold);
  if (status === "completed") {
    const done = [...events].reverse().find((e) => e.event.type === "run.completed")?.event;
    return { status: "completed", runId, output: done?.type === "run.completed" ? done.output : null };
  }
  if (status === "failed") {
    const failed = [...events].reverse().find((e) => e.event.type === "run.failed")?.event;
    return {
      status: "failed",
      runId,
      error: failed?.type === "run.failed" ? failed.error : { name: "Error", message: "failed" },
    };
  }
  return resultFromFold(runId, fold);
};
