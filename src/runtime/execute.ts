import type { ErrorInfo, HoldReason, Masker, RecordedEvent } from "../events/index.js";
import {
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
  const { writer } = run;
  const runId = writer.runId;
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
  let ended: { readonly output: unknown } | { readonly error: unknown };
  try {
    ended = { output: await run.agent.run(turn, run.input) };
  } catch (error) {
    ended = { error };
  }
  await turn.settle();
  if (turn.runWasPruned)
    return (
      (await prunedResult(deps.journal, runId)) ?? elsewhere(runId, "the run is no longer in the journal")
    );
  if (turn.ownershipWasLost)
    return elsewhere(runId, turn.lostBecause ?? "this worker lost the run to another owner");
  try {
    const result = await finish(deps.masker, writer, ended);
    if (ENDING_STATUSES.has(result.status as RunStatus)) await deps.runEnded(run.chatId);
    return result;
  } catch (error) {
    // Not this worker's run any more: write nothing; the owner (or the next recovery) goes on.
    if (error instanceof FencedOut || error instanceof WrongExpectedVersion)
      return elsewhere(runId, error.message);
    throw error;
  }
};

const elsewhere = (runId: string, state: string): RunResult => ({ status: "elsewhere", runId, state });

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
